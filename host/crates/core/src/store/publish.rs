//! The rebuild and publish: the whole list in the order stubs were added on the
//! shared clock (files and API stubs alike), a later file stub whose id was read
//! already left out and reported, then one swap into the engine.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::files::{FileKey, FileState};
use super::{Counts, State, Store, counts};
use crate::mapping::Mapping;
use crate::mapping::load;

impl State {
    pub(super) fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The files in the order they were added.
    pub(super) fn files_in_order(&self) -> Vec<(&FileKey, &FileState)> {
        let mut v: Vec<_> = self.files.iter().collect();
        v.sort_unstable_by_key(|(_, f)| f.added);
        v
    }
}

impl Store {
    /// Builds the full list, in the order the stubs were added, and swaps it in.
    pub(super) fn publish(&self, st: &mut State) -> Counts {
        let files = st.files_in_order();
        let mut all: Vec<Arc<Mapping>> = Vec::with_capacity(
            files.iter().map(|(_, f)| f.mappings.len()).sum::<usize>() + st.api.len(),
        );
        let mut api = st.api.iter().peekable();
        for (_, f) in files {
            while let Some((_, m)) = api.next_if(|(added, _)| *added < f.added) {
                all.push(m.clone());
            }
            for m in &f.mappings {
                if st.deleted.contains(&m.id) {
                    continue;
                }
                all.push(
                    st.overrides
                        .get(&m.id)
                        .cloned()
                        .unwrap_or_else(|| m.clone()),
                );
            }
        }
        all.extend(api.map(|(_, m)| m.clone()));
        // A reloaded file may bring an id that a file read earlier has.
        let file_stubs = all.iter().filter(|m| m.source.is_some());
        let (keep, duplicates) = load::first_of_each_id(file_stubs);
        if !duplicates.is_empty() {
            let mut keep = keep.into_iter();
            all.retain(|m| m.source.is_none() || keep.next().unwrap_or(true));
            for p in &duplicates {
                if !st.duplicates.contains(p) {
                    tracing::warn!("{p}");
                }
            }
        }
        st.duplicates = duplicates;
        self.engine.replace_shared(all);
        self.swaps.fetch_add(1, Ordering::Relaxed);
        counts(st)
    }

    /// How many mapping sets have been published so far.
    pub fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }
}
