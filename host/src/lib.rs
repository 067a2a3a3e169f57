//! decoy: a service-virtualization ("mock") engine that serves WireMock-format
//! mappings, fast. This crate is the `decoy` binary and what only it needs: the HTTP
//! transport, WireMock's admin API, the file watcher and the wiring of `decoy serve`.
//!
//! # Layout
//!
//! The workspace's crates are layers; each depends only on the ones below it:
//!
//! ```text
//! decoy (this crate: http, admin, watch, server, commands)
//!   └─ decoy-mq        MQ mappings, the broker-neutral runtime, RabbitMQ, IBM MQ (feature)
//!        └─ decoy-core  mappings + loader, store, engine, journal, metrics, plugin adapters
//!             ├─ decoy-matching     WireMock's matchers, compiled; the custom-matcher seam
//!             └─ decoy-plugin-host  the wasmtime runtime: load, sandbox, pool, call
//! decoy-spec (under all but the plugin runtime): request snapshot, response plan, field errors
//! ```
//!
//! A request flows top to bottom through these modules:
//!
//! - [`http`]: the transport. hyper accepts a connection, reads a request whole and
//!   turns it into a [`RequestSnapshot`](decoy_spec::request::RequestSnapshot); later
//!   it carries out the [`ResponsePlan`](decoy_spec::plan::ResponsePlan) it gets back
//!   from the engine (`decoy_core::engine`): delay timers, dribbled bodies, faults.
//! - [`admin`]: WireMock's admin API under `/__admin`, and record/playback.
//! - [`watch`]: hot reload; file-system events, debounced, fed to the store
//!   (`decoy_core::store`) and the MQ service (`decoy_mq`).
//! - [`webhooks`]: sends stubs' (and MQ mappings') webhooks after their answer,
//!   within limits, through the one outbound client (`http::client`) that proxying
//!   and recording use too.
//! - [`server`]: wiring for `decoy serve`: load, watch, bind, spawn.
//!
//! The binary (`src/main.rs`, `src/commands/`) is a thin clap front end over these.

pub mod admin;
pub mod http;
pub mod server;
pub mod watch;
pub mod webhooks;
