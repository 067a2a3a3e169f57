//! Scenario states in one Redis hash (scenario name → state; absent: `Started`).
//!
//! A request's candidate stubs that belong to scenarios go to Redis in one Lua
//! script, which picks the first whose scenario is in its required state and moves
//! that scenario on. Redis runs a script alone, so of two instances racing from the
//! same state exactly one takes the transition, as with one WireMock.

use std::collections::HashMap;

use decoy_core::engine::STARTED;
use decoy_core::shared::{BoxFuture, SharedScenarios, Step, Unavailable};

use crate::SharedState;
use crate::health::Operation;

/// KEYS[1]: the hash. ARGV: per step, the scenario, the required state and the new
/// state, each of the last two prefixed with `=` when there is one (empty: none).
/// Returns the 1-based index of the step that won, or 0.
const CHOOSE: &str = r#"
local n = #ARGV / 3
for i = 0, n - 1 do
  local name = ARGV[i * 3 + 1]
  local required = ARGV[i * 3 + 2]
  local new = ARGV[i * 3 + 3]
  local current = redis.call('HGET', KEYS[1], name) or 'Started'
  if required == '' or string.sub(required, 2) == current then
    if new ~= '' then
      local state = string.sub(new, 2)
      if state == 'Started' then
        redis.call('HDEL', KEYS[1], name)
      else
        redis.call('HSET', KEYS[1], name, state)
      end
    end
    return i + 1
  end
end
return 0
"#;

static SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(CHOOSE));

fn marked(v: Option<&str>) -> String {
    v.map(|s| format!("={s}")).unwrap_or_default()
}

impl SharedState {
    async fn all_states(&self) -> Result<HashMap<String, String>, Unavailable> {
        let key = self.keys.scenarios.clone();
        self.call(|mut c| async move { redis::cmd("HGETALL").arg(key).query_async(&mut c).await })
            .await
    }
}

impl SharedScenarios for SharedState {
    fn choose<'a>(
        &'a self,
        steps: &'a [Step<'a>],
    ) -> BoxFuture<'a, Result<Option<usize>, Unavailable>> {
        Box::pin(async move {
            let mut invocation = SCRIPT.key(&self.keys.scenarios);
            for s in steps {
                invocation
                    .arg(s.scenario)
                    .arg(marked(s.required))
                    .arg(marked(s.new_state));
            }
            let won: i64 = self
                .call(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await
                .map_err(|e| self.failed(Operation::Scenario, e))?;
            Ok(usize::try_from(won).ok().and_then(|i| i.checked_sub(1)))
        })
    }

    fn states(&self) -> BoxFuture<'_, Result<HashMap<String, String>, Unavailable>> {
        Box::pin(async move {
            self.all_states()
                .await
                .map_err(|e| self.failed(Operation::Scenario, e))
        })
    }

    fn states_blocking(&self) -> Result<HashMap<String, String>, Unavailable> {
        self.block_on(self.all_states())
            .map_err(|e| self.failed(Operation::Scenario, e))
    }

    fn set_state(&self, name: &str, state: &str) -> Result<(), Unavailable> {
        let key = self.keys.scenarios.clone();
        let (name, state) = (name.to_owned(), state.to_owned());
        self.block_on(self.call(|mut c| async move {
            if state == STARTED {
                redis::cmd("HDEL")
                    .arg(key)
                    .arg(name)
                    .query_async::<()>(&mut c)
                    .await
            } else {
                redis::cmd("HSET")
                    .arg(key)
                    .arg(name)
                    .arg(state)
                    .query_async::<()>(&mut c)
                    .await
            }
        }))
        .map_err(|e| self.failed(Operation::Scenario, e))
    }

    fn reset(&self) -> Result<(), Unavailable> {
        let key = self.keys.scenarios.clone();
        self.block_on(self.call(|mut c| async move {
            redis::cmd("DEL").arg(key).query_async::<()>(&mut c).await
        }))
        .map_err(|e| self.failed(Operation::Scenario, e))
    }
}
