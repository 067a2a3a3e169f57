//! decoy: a service-virtualization ("mock") engine that serves WireMock-format
//! mappings, fast.
//!
//! # Layout
//!
//! A request flows top to bottom through these modules:
//!
//! - [`http`]: the transport. hyper accepts a connection, reads a request whole and
//!   turns it into a [`request::RequestSnapshot`]; later it carries out the
//!   [`plan::ResponsePlan`] it gets back (delay timers, dribbled bodies, faults).
//! - [`engine`]: the live [`engine::MappingSet`] (swapped atomically on reload), the
//!   candidate [`engine::index`] that keeps selection cost flat as mappings grow,
//!   scenario states, and the "not matched" [`engine::report`].
//! - [`matching`]: compiled request patterns and WireMock's value operators
//!   (`equalTo` … `matchesXPath`), evaluated synchronously on the snapshot.
//! - [`mapping`]: the immutable [`mapping::Mapping`] spec, parsed from JSON with a
//!   path to every field so errors can say exactly where, and the root-directory
//!   [`mapping::load`]er.
//! - [`plan`]: the transport-neutral response plan and the delay/fault vocabulary, so
//!   a message-queue transport can reuse matching and delays.
//! - [`server`]: wiring for `decoy serve`: load, watch, bind, spawn.
//!
//! Around that path, the mapping lifecycle:
//!
//! - [`store`]: where mappings come from (files, the admin API); keeps each file's
//!   last good version and publishes every change to the engine in one swap.
//! - [`watch`]: hot reload; file-system events, debounced, fed to the store.
//! - [`admin`]: WireMock's admin API under `/__admin`, and record/playback.
//! - [`journal`]: the bounded record of served requests; [`metrics`]: counters and
//!   latency histograms in the Prometheus text format.
//!
//! And beside HTTP, [`mq`]: message-queue virtual services (AMQP today), which reuse
//! the value patterns of [`matching`] and the delay vocabulary of [`plan`].
//!
//! The binary (`src/main.rs`, `src/commands/`) is a thin clap front end over these.

pub mod admin;
pub mod engine;
pub mod http;
pub mod journal;
pub mod mapping;
pub mod matching;
pub mod metrics;
pub mod mq;
pub mod plan;
pub mod plugin;
pub mod request;
pub mod server;
pub mod store;
pub mod watch;
