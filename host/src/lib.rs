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
//!   ├─ decoy-mq        MQ mappings, the broker-neutral runtime, RabbitMQ, IBM MQ (feature)
//!   ├─ decoy-state     state shared by several instances in Redis (--state)
//!   └─ decoy-core      mappings + loader, store, engine, the serve step, journal,
//!        │             metrics, plugin adapters, webhook definitions
//!        ├─ decoy-matching     WireMock's matchers, compiled; the custom-matcher seam
//!        │    ├─ decoy-datefmt     the lexer of Java date patterns
//!        │    └─ decoy-jsonpath    Jayway's `=~` rewritten for RFC 9535 JSONPath
//!        └─ decoy-plugin-host  the wasmtime runtime: load, sandbox, pool, call
//! decoy-spec (under all but the plugin runtime): request snapshot, response plan, field errors
//!   └─ decoy-multipart  the parser of multipart bodies
//! ```
//!
//! A request flows top to bottom through these modules:
//!
//! - [`http`]: the transport. A serving thread (`http::threads`, `--thread-layout`)
//!   accepts a connection and keeps it; hyper reads a request whole and
//!   decodes it into a [`RequestSnapshot`](decoy_spec::request::RequestSnapshot);
//!   `decoy_core::serve` answers it (match, plan, transformers) and records it
//!   (metrics, journal, webhooks); the transport forwards what a stub proxies and
//!   encodes the [`ResponsePlan`](decoy_spec::plan::ResponsePlan): delay timers,
//!   dribbled bodies, faults. The MQ runtime (`decoy_mq`) records through the same step.
//! - [`admin`]: WireMock's admin API under `/__admin`, and record/playback.
//! - [`watch`]: hot reload; file-system events, debounced, fed to the store
//!   (`decoy_core::store`) and the MQ service (`decoy_mq`).
//! - [`webhooks`]: sends stubs' (and MQ mappings') webhooks after their answer,
//!   within limits, through the one outbound client (`http::client`) that proxying
//!   and recording use too.
//! - [`server`]: wiring for `decoy serve`: load, watch, bind, spawn; which transport
//!   claims which files of the root.
//!
//! The binary (`src/main.rs`, `src/commands/`) is a thin clap front end over these.

pub mod admin;
pub mod grpc;
pub mod http;
pub mod server;
pub mod watch;
pub mod webhooks;
