//! The `decoy` command line: a thin clap front end over the library.

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// decoy: a fast service-virtualization (mock) engine for WireMock-format mappings.
///
/// Point it at a WireMock root directory (one holding `mappings/` and `__files/`) and
/// it answers as WireMock would.
#[derive(Debug, Parser)]
#[command(name = "decoy", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the mappings of a root directory over HTTP (and HTTPS).
    Serve(commands::serve::ServeArgs),
    /// Load a root directory like `serve`, print every problem, and exit non-zero if
    /// any mapping was rejected (for CI).
    Validate(commands::validate::ValidateArgs),
    /// Forward every request to a real service and, on Ctrl-C, write what went
    /// through as mappings (and body files) into the root directory.
    Record(commands::record::RecordArgs),
    /// Work with WASM plugins (`decoy plugin check FILE.wasm`).
    Plugin(commands::plugin::PluginArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => commands::serve::run(args),
        Command::Validate(args) => commands::validate::run(args),
        Command::Record(args) => commands::record::run(args),
        Command::Plugin(args) => commands::plugin::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("decoy: error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::from(2)
        }
    }
}
