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
        /// The compiled-code cache `serve` uses (default: $XDG_CACHE_HOME/decoy/plugins
        /// or ~/.cache/decoy/plugins): a file checked or served before loads at once.
        #[arg(long, value_name = "DIR")]
        plugin_cache_dir: Option<PathBuf>,
        /// Compile without reading or filling the cache.
        #[arg(long, conflicts_with = "plugin_cache_dir")]
        no_plugin_cache: bool,
    },
}

pub fn run(args: PluginArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PluginCommand::Check {
            file,
            plugin_cache_dir,
            no_plugin_cache,
        } => {
            let cache = if no_plugin_cache {
                None
            } else {
                plugin_cache_dir.or_else(decoy_plugin_host::Plugins::default_cache_dir)
            };
            let report = decoy_plugin_host::check_file(&file, cache.as_deref())
                .map_err(anyhow::Error::msg)?;
            super::say::out(format_args!(
                "{}: a decoy plugin (decoy:plugin@0.1.0)",
                file.display()
            ));
            super::say::out(format_args!("  worlds:  {}", report.worlds.join(", ")));
            super::say::out(format_args!("  exports: {}", report.exports.join(", ")));
            super::say::out(format_args!("  imports: {}", report.imports.join(", ")));
            Ok(ExitCode::SUCCESS)
        }
    }
}
