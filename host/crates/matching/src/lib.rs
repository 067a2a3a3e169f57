//! WireMock's request matching, compiled: value patterns (`equalTo` … `not`), JSON
//! equality with placeholders, XML equality and XPath, date-time comparisons, and the
//! `request` object of a mapping.
//!
//! Everything here is synchronous and works on an owned
//! [`RequestSnapshot`](decoy_spec::request::RequestSnapshot), so the same code serves
//! HTTP requests and queue messages.
//!
//! May depend on: `decoy-spec`, `decoy-datefmt`, `decoy-jsonpath`, `decoy-jsonfmt`.
//! Must not depend on: the plugin runtime, the engine core, transports. Custom
//! matchers come in through the [`custom`] traits instead.
//!
//! Modules, leaves first: [`limits`] (depth limits, budgets and the scoring
//! deadline that bound every matcher), [`regex`] (Java-style whole-value regexes), [`date`],
//! [`json`], [`xml`], then [`pattern`] (the value operators, using all of those),
//! [`custom`] (the plugin seam), [`near_miss`] (WireMock's closeness model: a value's
//! score, the not-matched report's rows and printers) and [`request`] (the `request`
//! object: one module per part of a request, each with its parse, match, score and
//! report rows).

pub mod custom;
pub mod date;
pub mod json;
pub mod limits;
pub mod near_miss;
pub mod pattern;
#[cfg(test)]
mod proptests;
pub mod regex;
pub mod request;
pub mod xml;
