//! `decoy plugin check FILE.wasm`: is this a plugin decoy can run, and what is it?

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    command: PluginCommand,
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    /// Compile and link a .wasm file as decoy would, and say which worlds it
    /// implements and what it imports; fails with the reason when it cannot run.
    Check {
        /// The plugin component (.wasm).
        file: PathBuf,
    },
}

pub fn run(args: PluginArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PluginCommand::Check { file } => {
            let report = decoy_plugin_host::check_file(&file).map_err(anyhow::Error::msg)?;
            println!("{}: a decoy plugin (decoy:plugin@0.1.0)", file.display());
            println!("  worlds:  {}", report.worlds.join(", "));
            println!("  exports: {}", report.exports.join(", "));
            println!("  imports: {}", report.imports.join(", "));
            Ok(ExitCode::SUCCESS)
        }
    }
}
