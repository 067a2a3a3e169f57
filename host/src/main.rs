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
    // A flag given twice keeps its last value, so the command line's arguments win
    // over DECOY_OPTIONS / WIREMOCK_OPTIONS, which come before them.
    // A negative number is a value (refused naming its option), not an unknown flag.
    #[command(args_override_self = true, allow_negative_numbers = true)]
    Serve(commands::serve::ServeArgs),
    /// Load a root directory like `serve`, print every problem, and exit non-zero if
    /// any mapping was rejected (for CI).
    Validate(commands::validate::ValidateArgs),
    /// Forward every request to a real service and, on Ctrl-C, write what went
    /// through as mappings (and body files) into the root directory.
    #[command(allow_negative_numbers = true)]
    Record(commands::record::RecordArgs),
    /// Record real MQ back ends: forward each request to the back end, pass its reply
    /// back, and on Ctrl-C write one MQ mapping per distinct request (docs/mq.md).
    RecordMq(commands::record_mq::RecordMqArgs),
    /// Work with WASM plugins (`decoy plugin check FILE.wasm`).
    Plugin(commands::plugin::PluginArgs),
    /// Ask a running decoy for `GET /__admin/health`: exit 0 when healthy, 1 when not
    /// (the container image's health check). With `--admin-token` on the server, set
    /// DECOY_ADMIN_TOKEN to the same token.
    Health(commands::health::HealthArgs),
}

fn main() -> ExitCode {
    // `decoy serve` also takes options from DECOY_OPTIONS and WIREMOCK_OPTIONS, as
    // the wiremock/wiremock image does; the command line's own arguments win.
    let argv = commands::env_options::with_env_options(std::env::args_os().collect());
    let cli = Cli::parse_from(argv);
    let result = match cli.command {
        Command::Serve(args) => commands::serve::run(args),
        Command::Validate(args) => commands::validate::run(args),
        Command::Record(args) => commands::record::run(args),
        Command::RecordMq(args) => commands::record_mq::run(args),
        Command::Plugin(args) => commands::plugin::run(args),
        Command::Health(args) => commands::health::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            commands::say::err(format_args!("decoy: error: {e}"));
            for cause in e.chain().skip(1) {
                commands::say::err(format_args!("  caused by: {cause}"));
            }
            ExitCode::from(2)
        }
    }
}
