//! A plugin built against `decoy:plugin@0.1.0` as it was first published: its WIT is
//! the copy in `wit/`, frozen, and it uses `wit-bindgen` directly rather than the
//! guest SDK (which follows the current WIT). decoy must link and run it unchanged
//! whatever the package has gained since (`request-info`, ...): the compatibility
//! rule of `wit/plugin.wit`.
//!
//! As a transformer it writes the method, the path and a call count (kv) into the
//! body and logs a line; as a matcher it matches when the request has an `x-old`
//! header.

// A native build (`cargo clippy --all-targets`) exports nothing: export names of a
// component are not symbols a native linker takes.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

#[allow(unsafe_code, missing_debug_implementations, clippy::all)]
mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "transformer-and-matcher",
    });
}

use bindings::decoy::plugin::types::{CallContext, PluginError, Request, Response};
use bindings::decoy::plugin::{kv, log};
use bindings::exports;

struct Old;

impl exports::decoy::plugin::transformer::Guest for Old {
    fn transform(
        _context: CallContext,
        request: Request,
        response: Response,
    ) -> Result<Response, PluginError> {
        let n = kv::increment("calls", 1).map_err(|message| PluginError { message })?;
        log::log(log::Level::Info, "old plugin called", &[]);
        let (method, path) = match &request {
            Request::Http(h) => (h.method.clone(), h.path.clone()),
            Request::Mq(m) => (String::new(), m.destination.clone()),
        };
        Ok(match response {
            Response::Http(mut h) => {
                h.body = format!("old wit: {method} {path} call {n}").into_bytes();
                Response::Http(h)
            }
            other => other,
        })
    }
}

impl exports::decoy::plugin::matcher::Guest for Old {
    fn matches(_context: CallContext, request: Request) -> Result<bool, PluginError> {
        Ok(match &request {
            Request::Http(h) => h.headers.iter().any(|(k, _)| k == "x-old"),
            Request::Mq(_) => false,
        })
    }
}

// The export glue is generated in this crate, so its unsafe code is allowed here.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
const _: () = {
    bindings::export!(Old with_types_in bindings);
};
