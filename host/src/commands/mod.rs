//! One module per subcommand.

pub mod env_options;
pub mod health;
pub mod plugin;
pub mod record;
pub mod record_mq;
pub mod say;
pub mod serve;
pub mod validate;
