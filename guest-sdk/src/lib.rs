//! Write decoy plugins in Rust (decoy: the WireMock-compatible mock server; its
//! `docs/plugins.md` describes the plugin interface and the sandbox).
//!
//! A decoy plugin is a WebAssembly component that decoy loads when a mapping names it:
//! a **transformer** builds or edits the response of a matched request
//! (`"response": {"transformers": ["my-plugin"], "transformerParameters": {...}}`), a
//! **matcher** decides whether a request matches
//! (`"request": {"customMatcher": {"name": "my-plugin", "parameters": {...}}}`).
//! This crate wraps the generated bindings of `wit/plugin.wit` in typed accessors, so
//! a plugin is a few lines.
//!
//! # A complete plugin
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "greeter"
//! edition = "2024"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! decoy-plugin-sdk = { path = "../../guest-sdk" }
//! serde = { version = "1", features = ["derive"] }
//! ```
//!
//! That path is for a plugin inside decoy's repository. The crate is not published on
//! crates.io: a plugin elsewhere depends on it through git (pinned to a commit, so
//! a rebuild gets the same plugin interface), or through a path to
//! a checkout of decoy:
//!
//! ```toml
//! [dependencies]
//! decoy-plugin-sdk = { git = "https://URL-OF-YOUR-DECOY-REPOSITORY.git", rev = "COMMIT" }
//! # or: decoy-plugin-sdk = { path = "/path/to/decoy/guest-sdk" }
//! ```
//!
//! `src/lib.rs`:
//!
//! ```
//! use decoy_plugin::{Context, Error, Request, Response, Transformer};
//!
//! #[derive(serde::Deserialize)]
//! struct Params {
//!     greeting: String,
//! }
//!
//! struct Greeter;
//!
//! impl Transformer for Greeter {
//!     fn transform(ctx: &Context, req: &Request, mut resp: Response) -> Result<Response, Error> {
//!         let params: Params = ctx.parameters()?;
//!         let name = req.query("name").unwrap_or("stranger");
//!         resp.set_header("content-type", "text/plain");
//!         resp.set_body(format!("{} {name}", params.greeting));
//!         Ok(resp)
//!     }
//! }
//!
//! decoy_plugin::export!(transformer = Greeter);
//! ```
//!
//! Build it with `rustup target add wasm32-wasip2` once, then
//! `cargo build --release --target wasm32-wasip2`, and copy
//! `target/wasm32-wasip2/release/greeter.wasm` to the `plugins/` folder of the
//! directory `decoy serve` serves. A mapping that names it:
//!
//! ```json
//! {"request": {"urlPath": "/hello"},
//!  "response": {"status": 200, "transformers": ["greeter"],
//!               "transformerParameters": {"greeting": "Hello"}}}
//! ```
//!
//! `GET /hello?name=Ada` answers `Hello Ada`.
//!
//! # What a plugin can and cannot do
//!
//! It sees one request at a time and returns plain data. It has no file system, no
//! network and no environment; clocks and random numbers work. Each call has a CPU
//! deadline (100 ms unless the plugin's settings say otherwise) and each instance a
//! memory cap (64 MiB). Instances are reused between calls, so a `static` cache (of
//! compiled templates, say) survives from one call to the next, but is not shared
//! between instances: use [`kv`] for state every call must see, and [`cache`] for
//! work every instance would otherwise repeat (a value one instance computed and
//! another may reuse). Work a transformer
//! does once per mapping (compiling what the mapping's answer holds) can go into a
//! [`Prepare`], which decoy calls outside the calls' deadline. A panic ends the
//! call: decoy answers that request with a 500 naming the plugin and goes on.
//! What decoy knows beyond the request itself (the client's address, the machine's
//! name) is in [`request_info`].

use std::borrow::Cow;

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

/// The generated bindings of decoy's host interfaces (the raw WIT types).
pub mod wit {
    #![allow(missing_debug_implementations, unsafe_code, clippy::all)]
    wit_bindgen::generate!({
        path: "../wit",
        world: "host-api",
        generate_all,
    });
    pub use decoy::plugin::{cache, kv, log, request_info, types};
}

include!(concat!(env!("OUT_DIR"), "/export_macro.rs"));

use wit::types;

/// What a plugin returns when it cannot do its job. decoy answers the request with a
/// 500 (HTTP) or sends the message down the unmatched path (MQ) and logs the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl Error {
    pub fn new(message: impl Into<String>) -> Error {
        Error(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error(e.to_string())
    }
}

impl From<String> for Error {
    fn from(e: String) -> Error {
        Error(e)
    }
}

impl From<&str> for Error {
    fn from(e: &str) -> Error {
        Error(e.to_owned())
    }
}

/// Builds or edits the response of a matched request.
pub trait Transformer {
    /// `response` is what the mapping declares (its body read from `bodyFileName`
    /// when it names one); the result is what decoy sends.
    fn transform(ctx: &Context, request: &Request, response: Response) -> Result<Response, Error>;
}

/// A transformer's per-mapping work, done outside the calls' deadline (the
/// `prepare` interface of `wit/plugin.wit`): before an instance first transforms an
/// answer of a mapping, and again when that answer changes, decoy calls `prepare`
/// on it with the call's context and that answer, under a budget of seconds. It
/// returns how many things this instance has compiled since it started (counting
/// those compiled during calls), which decoy adds up per plugin. Export it with
/// `export!(transformer = T, prepare = P)`.
pub trait Prepare {
    fn prepare(ctx: &Context, response: &Response) -> Result<u64, Error>;
}

/// Decides whether a request matches a mapping. It runs after the mapping's other
/// request fields matched.
pub trait Matcher {
    fn matches(ctx: &Context, request: &Request) -> Result<bool, Error>;
}

/// Which mapping the call is for, and its parameters.
#[derive(Debug, Clone)]
pub struct Context(pub types::CallContext);

impl Context {
    pub fn mapping_id(&self) -> &str {
        &self.0.mapping_id
    }

    pub fn mapping_name(&self) -> Option<&str> {
        self.0.mapping_name.as_deref()
    }

    /// The parameters as JSON text (`{}` when the mapping gives none).
    pub fn parameters_json(&self) -> &str {
        &self.0.parameters
    }

    /// The parameters, deserialized into the plugin's own type.
    pub fn parameters<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(&self.0.parameters)
            .map_err(|e| Error(format!("bad parameters for this plugin: {e}")))
    }
}

/// The request being answered: an HTTP request or a message from a queue.
#[derive(Debug, Clone)]
pub struct Request(pub types::Request);

fn find<'a>(fields: &'a [(String, String)], name: &str, ignore_case: bool) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| {
            if ignore_case {
                k.eq_ignore_ascii_case(name)
            } else {
                k == name
            }
        })
        .map(|(_, v)| v.as_str())
}

impl Request {
    pub fn http(&self) -> Option<&types::HttpRequest> {
        match &self.0 {
            types::Request::Http(h) => Some(h),
            types::Request::Mq(_) => None,
        }
    }

    pub fn mq(&self) -> Option<&types::MqMessage> {
        match &self.0 {
            types::Request::Mq(m) => Some(m),
            types::Request::Http(_) => None,
        }
    }

    /// `GET`, `POST`, ... (empty for a message).
    pub fn method(&self) -> &str {
        self.http().map_or("", |h| h.method.as_str())
    }

    /// Path and query as received (for a message, its destination).
    pub fn url(&self) -> &str {
        match &self.0 {
            types::Request::Http(h) => &h.url,
            types::Request::Mq(m) => &m.destination,
        }
    }

    pub fn path(&self) -> &str {
        match &self.0 {
            types::Request::Http(h) => &h.path,
            types::Request::Mq(m) => &m.destination,
        }
    }

    /// The first value of a query parameter.
    pub fn query(&self, name: &str) -> Option<&str> {
        self.http().and_then(|h| find(&h.query, name, false))
    }

    /// Every value of a query parameter.
    pub fn query_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.http()
            .into_iter()
            .flat_map(|h| h.query.iter())
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A header (HTTP, case-insensitive) or a message property (exact name).
    pub fn header(&self, name: &str) -> Option<&str> {
        match &self.0 {
            types::Request::Http(h) => find(&h.headers, name, true),
            types::Request::Mq(m) => find(&m.properties, name, false),
        }
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.http().and_then(|h| find(&h.cookies, name, false))
    }

    /// A named path parameter of a `urlPathTemplate` mapping.
    pub fn path_parameter(&self, name: &str) -> Option<&str> {
        self.http()
            .and_then(|h| find(&h.path_parameters, name, false))
    }

    pub fn body(&self) -> &[u8] {
        match &self.0 {
            types::Request::Http(h) => &h.body,
            types::Request::Mq(m) => &m.body,
        }
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn body_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.body())
    }

    /// The body parsed as JSON into `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(self.body())
            .map_err(|e| Error(format!("the request body is not the JSON expected: {e}")))
    }
}

/// The response (or reply message) to send.
#[derive(Debug, Clone)]
pub struct Response(pub types::Response);

impl Response {
    /// An HTTP response with no headers and an empty body.
    pub fn http(status: u16) -> Response {
        Response(types::Response::Http(types::HttpResponse {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            delay_ms: None,
        }))
    }

    /// A reply message with an empty body.
    pub fn mq() -> Response {
        Response(types::Response::Mq(types::MqReply {
            body: Vec::new(),
            properties: Vec::new(),
            destination: None,
            delay_ms: None,
        }))
    }

    /// The HTTP status (0 for a message).
    pub fn status(&self) -> u16 {
        match &self.0 {
            types::Response::Http(h) => h.status,
            types::Response::Mq(_) => 0,
        }
    }

    /// Sets the HTTP status (ignored for a message).
    pub fn set_status(&mut self, status: u16) -> &mut Self {
        if let types::Response::Http(h) = &mut self.0 {
            h.status = status;
        }
        self
    }

    fn fields_mut(&mut self) -> &mut Vec<(String, String)> {
        match &mut self.0 {
            types::Response::Http(h) => &mut h.headers,
            types::Response::Mq(m) => &mut m.properties,
        }
    }

    /// Header values (HTTP) or properties (message), in order.
    pub fn headers(&self) -> &[(String, String)] {
        match &self.0 {
            types::Response::Http(h) => &h.headers,
            types::Response::Mq(m) => &m.properties,
        }
    }

    /// Mutable access to the headers (HTTP) or properties (message).
    pub fn headers_mut(&mut self) -> &mut Vec<(String, String)> {
        self.fields_mut()
    }

    /// Replaces every value of header (or property) `name` with `value`.
    pub fn set_header(&mut self, name: &str, value: impl Into<String>) -> &mut Self {
        let http = matches!(self.0, types::Response::Http(_));
        let fields = self.fields_mut();
        fields.retain(|(k, _)| {
            if http {
                !k.eq_ignore_ascii_case(name)
            } else {
                k != name
            }
        });
        fields.push((name.to_owned(), value.into()));
        self
    }

    pub fn body(&self) -> &[u8] {
        match &self.0 {
            types::Response::Http(h) => &h.body,
            types::Response::Mq(m) => &m.body,
        }
    }

    pub fn body_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.body())
    }

    pub fn set_body(&mut self, body: impl Into<Vec<u8>>) -> &mut Self {
        let body = body.into();
        match &mut self.0 {
            types::Response::Http(h) => h.body = body,
            types::Response::Mq(m) => m.body = body,
        }
        self
    }

    /// Serializes `value` as the body and sets `content-type: application/json`.
    pub fn set_json<T: serde::Serialize>(&mut self, value: &T) -> Result<&mut Self, Error> {
        let body = serde_json::to_vec(value)?;
        self.set_header("content-type", "application/json");
        Ok(self.set_body(body))
    }

    /// Adds a delay (milliseconds) to the mapping's own.
    pub fn set_delay_ms(&mut self, ms: u32) -> &mut Self {
        match &mut self.0 {
            types::Response::Http(h) => h.delay_ms = Some(ms),
            types::Response::Mq(m) => m.delay_ms = Some(ms),
        }
        self
    }
}

/// Log lines in decoy's log, tagged with the plugin's name.
pub mod log {
    use super::wit::log::{Level, log};

    pub fn debug(message: &str) {
        log(Level::Debug, message, &[]);
    }

    pub fn info(message: &str) {
        log(Level::Info, message, &[]);
    }

    pub fn warn(message: &str) {
        log(Level::Warn, message, &[]);
    }

    pub fn error(message: &str) {
        log(Level::Error, message, &[]);
    }

    /// A line with structured fields: `log::with_fields(Level::Info, "created", &[("id", "7")])`.
    pub fn with_fields(level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        log(level, message, &fields);
    }

    pub use super::wit::log::Level as LogLevel;
}

/// The plugin's key-value store, shared by all its calls and instances (in memory,
/// lost when decoy stops).
pub mod kv {
    use super::wit::kv as raw;

    pub fn get(key: &str) -> Option<Vec<u8>> {
        raw::get(key)
    }

    pub fn get_string(key: &str) -> Option<String> {
        raw::get(key).and_then(|v| String::from_utf8(v).ok())
    }

    pub fn set(key: &str, value: impl AsRef<[u8]>) -> Result<(), super::Error> {
        raw::set(key, value.as_ref()).map_err(super::Error)
    }

    pub fn delete(key: &str) -> bool {
        raw::delete(key)
    }

    /// Adds `delta` to the integer at `key` (0 when absent) and returns the result.
    pub fn increment(key: &str, delta: i64) -> Result<i64, super::Error> {
        raw::increment(key, delta).map_err(super::Error)
    }

    pub fn keys(prefix: &str) -> Vec<String> {
        raw::keys(prefix)
    }
}

/// Immutable values shared by every instance of this plugin, for work each instance
/// would otherwise repeat (the `cache` interface of `wit/plugin.wit`): what one
/// instance computed and stored, another reads instead of computing it again.
///
/// A value must be something the plugin can always make again: a
/// [`get`](cache::get) may miss at any time. The cache is this plugin's alone, lives
/// in decoy's memory, holds at most 32 MiB (keys and values; the oldest entries go
/// first, a larger value is not kept) and is emptied when the plugin is reloaded. A
/// key names one value: a [`put`](cache::put) under a key already present keeps the
/// value there, so put a version of the value's format in the key if it may change.
/// In a native build (the plugin's own `cargo test`) there is no host: the cache is
/// a map of the calling thread, as if that thread were every instance.
pub mod cache {
    /// The value stored under `key`, if it is still there.
    pub fn get(key: &str) -> Option<Vec<u8>> {
        #[cfg(target_arch = "wasm32")]
        {
            super::wit::cache::get(key)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            testing::VALUES.with_borrow(|v| v.get(key).cloned())
        }
    }

    /// Stores `value` under `key` for every instance of this plugin.
    pub fn put(key: &str, value: &[u8]) {
        #[cfg(target_arch = "wasm32")]
        {
            super::wit::cache::put(key, value)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            testing::VALUES.with_borrow_mut(|v| {
                v.entry(key.to_owned()).or_insert_with(|| value.to_vec());
            })
        }
    }

    /// Native builds only: the calling thread's cache, for a plugin's tests.
    #[cfg(not(target_arch = "wasm32"))]
    pub mod testing {
        use std::cell::RefCell;
        use std::collections::HashMap;

        thread_local! {
            pub(super) static VALUES: RefCell<HashMap<String, Vec<u8>>> = RefCell::new(HashMap::new());
        }

        /// Empties this thread's cache (as a reload of the plugin would).
        pub fn clear() {
            VALUES.with_borrow_mut(HashMap::clear);
        }
    }
}

/// What decoy knows of the call under way beyond the request: the client's address
/// and the machine's name (the `request-info` interface of `wit/plugin.wit`).
///
/// A plugin that calls these imports `request-info`, which decoy gives every plugin
/// from the release that added it; one that does not call them does not import it.
/// In a native build (the plugin's own `cargo test`) there is no host: the answers
/// are what [`request_info::testing`] set on the calling thread (no client address,
/// host name `localhost`, until set).
pub mod request_info {
    /// The IP address of the client whose HTTP request is being handled, as text
    /// (`127.0.0.1`, `::1`); `None` for a message from a queue. It is the
    /// connection's peer: behind a proxy, read its `X-Forwarded-For` header.
    pub fn client_ip() -> Option<String> {
        #[cfg(target_arch = "wasm32")]
        {
            super::wit::request_info::client_ip()
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            testing::CLIENT_IP.with_borrow(Clone::clone)
        }
    }

    /// The name of the machine decoy runs on, as WireMock's `{{hostname}}` gives it
    /// (Java's `InetAddress.getLocalHost().getHostName()`): `localhost` when the name
    /// does not resolve.
    pub fn hostname() -> String {
        #[cfg(target_arch = "wasm32")]
        {
            super::wit::request_info::hostname()
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            testing::HOSTNAME.with_borrow(Clone::clone)
        }
    }

    /// Native builds only: what [`client_ip`] and [`hostname`] answer on this
    /// thread, for a plugin's tests.
    #[cfg(not(target_arch = "wasm32"))]
    pub mod testing {
        use std::cell::RefCell;

        thread_local! {
            pub(super) static CLIENT_IP: RefCell<Option<String>> = const { RefCell::new(None) };
            pub(super) static HOSTNAME: RefCell<String> = RefCell::new("localhost".to_owned());
        }

        pub fn set_client_ip(ip: Option<&str>) {
            CLIENT_IP.set(ip.map(str::to_owned));
        }

        pub fn set_hostname(name: &str) {
            HOSTNAME.set(name.to_owned());
        }
    }
}

#[doc(hidden)]
pub mod __private {
    use super::*;

    pub fn transform<T: Transformer>(
        context: types::CallContext,
        request: types::Request,
        response: types::Response,
    ) -> Result<types::Response, types::PluginError> {
        T::transform(&Context(context), &Request(request), Response(response))
            .map(|r| r.0)
            .map_err(|e| types::PluginError { message: e.0 })
    }

    pub fn prepare<P: Prepare>(
        context: types::CallContext,
        response: types::Response,
    ) -> Result<u64, types::PluginError> {
        P::prepare(&Context(context), &Response(response))
            .map_err(|e| types::PluginError { message: e.0 })
    }

    pub fn matches<M: Matcher>(
        context: types::CallContext,
        request: types::Request,
    ) -> Result<bool, types::PluginError> {
        M::matches(&Context(context), &Request(request))
            .map_err(|e| types::PluginError { message: e.0 })
    }
}
