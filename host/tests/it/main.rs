//! decoy's integration tests, gathered into one test binary: each binary links the
//! whole engine with wasmtime (about 140 MB in a debug build), so one binary instead of
//! eleven keeps a clean `cargo test` several hundred megabytes smaller and links once.
//!
//! Run one group with a filter, e.g. `cargo test -p decoy --test it amqp::`.
//! Tests that need something from outside (a WireMock jar, the example plugins built by
//! `tests/run.sh`, an IBM MQ queue manager) are `#[ignore]`d with the reason, and
//! `tests/run.sh` runs them with `--ignored` once it has set that up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod admin_csrf;
mod amqp;
mod amqp1;
mod amqp_connections;
mod amqp_restart;
mod broker_auth;
mod cli;
mod dashboard;
mod emitted_messages;
mod filenames;
mod fixtures;
mod fuzz_requests;
mod grpc;
mod grpc_proxy;
mod hardening_matching;
mod hardening_server;
mod header_case;
#[cfg(feature = "ibmmq")]
mod ibmmq_live;
mod layouts;
mod lifecycle;
mod load_order;
mod matching;
mod mqtt;
mod nats;
mod nats_restart;
mod near_misses;
mod persistent;
mod plugin_examples;
mod plugin_races;
mod plugins;
mod record_mq;
mod responses;
mod robustness;
mod scale_out;
mod stub_files;
mod web_root;
mod webhooks;
