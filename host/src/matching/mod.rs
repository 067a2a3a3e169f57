//! Request matching: WireMock's value patterns and the compiled `request` object.
//!
//! Everything here is synchronous and works on an owned snapshot, so the same code
//! serves HTTP requests and (later) queue messages.

pub mod date;
pub mod json;
pub mod pattern;
pub mod regex;
pub mod request;
pub mod xml;
