//! One module per subcommand.

pub mod record;
pub mod serve;
pub mod validate;
