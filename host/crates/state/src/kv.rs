//! Plugins' `kv` stores shared by every instance: one Redis hash per plugin
//! (`<deployment>:kv:<plugin>`, `decoy:kv:<plugin>` by default), so a counter a
//! plugin increments through one instance is the one it reads through another. `increment` is Redis's HINCRBY, atomic across
//! instances. A call is bounded by `--state-timeout`; a failure is what the plugin
//! sees (or, where the WIT has no error, logged and counted).

use decoy_core::shared::Unavailable;

use crate::health::Operation;
use decoy_plugin_host::SharedKv;

use crate::SharedState;

impl SharedState {
    fn kv_call<T>(&self, cmd: redis::Cmd) -> Result<T, String>
    where
        T: redis::FromRedisValue + Send,
    {
        let result: Result<T, Unavailable> =
            self.block_on(self.call(|mut c| async move { cmd.query_async(&mut c).await }));
        result.map_err(|e| self.failed(Operation::Kv, e).to_string())
    }
}

impl SharedKv for SharedState {
    fn get(&self, plugin: &str, key: &str) -> Result<Option<Vec<u8>>, String> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.keys.kv(plugin)).arg(key);
        self.kv_call(cmd)
    }

    fn set(&self, plugin: &str, key: &str, value: &[u8]) -> Result<(), String> {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(self.keys.kv(plugin)).arg(key).arg(value);
        self.kv_call::<i64>(cmd).map(drop)
    }

    fn delete(&self, plugin: &str, key: &str) -> Result<bool, String> {
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(self.keys.kv(plugin)).arg(key);
        self.kv_call::<i64>(cmd).map(|n| n > 0)
    }

    fn increment(&self, plugin: &str, key: &str, delta: i64) -> Result<i64, String> {
        let mut cmd = redis::cmd("HINCRBY");
        cmd.arg(self.keys.kv(plugin)).arg(key).arg(delta);
        self.kv_call(cmd).map_err(|e| {
            if e.contains("not an integer") {
                format!("the value at {key:?} is not a decimal integer")
            } else if e.contains("overflow") {
                format!("adding {delta} to the value at {key:?} overflows")
            } else {
                e
            }
        })
    }

    fn keys(&self, plugin: &str, prefix: &str) -> Result<Vec<String>, String> {
        let mut cmd = redis::cmd("HKEYS");
        cmd.arg(self.keys.kv(plugin));
        let mut keys: Vec<String> = self.kv_call(cmd)?;
        keys.retain(|k| k.starts_with(prefix));
        keys.sort();
        Ok(keys)
    }
}
