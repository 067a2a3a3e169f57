//! Replication: what the shared-state crate (`--state`) calls. A change made through
//! the admin API goes to the shared [`StubReplica`] first; every instance, this one
//! included, applies it through [`Store::apply_replicated`] in the order the shared
//! store gave.

use std::sync::Arc;

use super::Store;
use super::files::file_ids;
use crate::mapping::Mapping;
use crate::shared::{self, StubReplica};

/// An admin-API change made on another instance, to apply here as it was there.
#[derive(Debug)]
pub enum Replicated {
    Put(Mapping),
    Remove(String),
    RemoveAll,
    Reset,
    /// The whole shared list after a (re)connection: these API stubs (in the order
    /// they were added) replace this instance's, and these file stubs are removed.
    Sync {
        stubs: Vec<Mapping>,
        removed: Vec<String>,
    },
}

impl Store {
    /// From now on, API changes go to `replica`, which applies them here (set once,
    /// when state is shared).
    pub fn set_replica(&self, replica: Arc<dyn StubReplica>) {
        let _ = self.replica.set(replica);
    }

    /// Why the shared stubs are not in step here, if state is shared and they are not.
    pub fn replica_problem(&self) -> Option<String> {
        self.replica.get()?.problem()
    }

    /// Hands a change to the replica, if there is one: `None` when there is none (the
    /// caller applies it here), else whether the shared store took it. The replica
    /// applies it here itself, through [`Store::apply_replicated`], in the order the
    /// shared store gave all changes, so every instance applies the same changes in
    /// the same order.
    pub(super) fn replicate(
        &self,
        write: impl FnOnce(&dyn StubReplica) -> Result<(), shared::Unavailable>,
    ) -> Option<Result<(), shared::Unavailable>> {
        let r = self.replica.get()?;
        Some(write(r.as_ref()))
    }

    /// Applies a change made through the admin API of this or another instance, as
    /// the shared store ordered it.
    pub fn apply_replicated(&self, change: Replicated) {
        match change {
            Replicated::Put(m) => {
                let done = self.upsert_here(m);
                if let Some(e) = &done.not_saved {
                    tracing::warn!("{e}");
                }
                self.lock().replicated.insert(done.mapping.id.clone());
            }
            Replicated::Remove(id) => {
                if let Err(e) = self.remove_here(&id, true) {
                    tracing::warn!("{e}");
                }
                self.lock().replicated.remove(id.as_str());
            }
            Replicated::RemoveAll => {
                self.remove_all_here();
                self.lock().replicated.clear();
            }
            Replicated::Reset => {
                self.reset_here();
                self.lock().replicated.clear();
            }
            Replicated::Sync { stubs, removed } => {
                let mut st = self.lock();
                let replicated = std::mem::take(&mut st.replicated);
                st.api.retain(|(_, m)| !replicated.contains(&m.id));
                st.overrides.clear();
                st.deleted.clear();
                let files = file_ids(&st);
                for m in stubs {
                    let m = Arc::new(m);
                    st.replicated.insert(m.id.clone());
                    if files.contains(&m.id) {
                        st.overrides.insert(m.id.clone(), m);
                    } else if let Some(slot) = st.api.iter_mut().find(|x| x.1.id == m.id) {
                        slot.1 = m;
                    } else {
                        let added = st.tick();
                        st.api.push((added, m));
                    }
                }
                for id in removed {
                    if files.contains(id.as_str()) {
                        st.deleted.insert(Arc::from(id));
                    }
                }
                self.publish(&mut st);
            }
        }
    }
}
