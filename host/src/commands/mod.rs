//! One module per subcommand.

pub mod plugin;
pub mod record;
pub mod serve;
pub mod validate;
