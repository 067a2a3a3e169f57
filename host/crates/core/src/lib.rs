//! decoy's engine core: what a mapping is, where mappings come from, and how a
//! request becomes a response plan, independent of any transport.
//!
//! - [`mapping`]: the immutable [`Mapping`](mapping::Mapping) parsed from JSON (every
//!   error names the file, the stub and the field) and the root-directory
//!   [`loader`](mapping::load), shared by stub files and transports' own mapping
//!   files.
//! - [`serve`]: the serve step every transport shares: answer (match, plan,
//!   transform), the report of a proxied request, and the record of the outcome
//!   (metrics, journal, recording, webhooks); a transport decodes, encodes, delays.
//! - [`engine`]: the live mapping set (swapped atomically on reload), the candidate
//!   index, scenario states, and the "not matched" report.
//! - [`store`]: mapping sources (files, the admin API), each file's last good version,
//!   one swap per change.
//! - [`journal`]: the bounded record of served requests; [`metrics`]: counters and
//!   latency histograms; [`latency`]: the fine histogram behind live percentiles.
//! - [`filenames`]: the names of the stub files decoy writes (save, recordings), from
//!   WireMock's templates (`--filename-template`).
//! - [`recording`]: what every recorder (HTTP, MQ) decides alike: a recorded
//!   request's body pattern (`equalToJson`, `equalToXml`, `equalTo`, or chosen
//!   fields), option sizes, body file extensions.
//! - [`files`]: opening the files users name (`bodyFileName`, the web root): only
//!   regular files, never blocking on a FIFO, and no more bytes than a limit.
//! - [`paths`]: the check that keeps every file name decoy builds or is given inside
//!   its folder (no `..`, no symlink leading out).
//! - [`stub_files`]: where a stub's file goes in `mappings/` and whether it may be
//!   written or deleted (inside the folder, links followed; a new file never replaces
//!   one; only a stub's own file).
//! - [`shared`]: the seams for state shared between instances (`--state`): scenario
//!   states, admin-API stubs, the journal's fan-in.
//! - [`plugins`]: the adapters between mappings and the WebAssembly plugin runtime
//!   (custom matchers, the transformer chain and its failure rule).
//! - [`templates`]: a stub's response templates compiled when it loads (one that
//!   fails is a problem of its field), and plain ones rendered here with no plugin
//!   call.
//! - [`webhooks`]: WireMock's `webhook` serve-event listener: definitions, rendering
//!   through `response-template`, and the [`WebhookSink`](webhooks::WebhookSink) the
//!   transports hand served requests to; also decoy's `message` listener, which
//!   publishes a message on an MQ connection once the answer is out.
//! - [`publish`]: the [`MessagePublisher`](publish::MessagePublisher) seam `decoy-mq`
//!   implements, so `message` listeners and the admin API publish without this crate
//!   naming a broker, and the sub-events a served request's listeners leave in the
//!   journal.
//! - [`threads`]: what the transports' serving threads share: their default count
//!   (one per core but one) and the runtime of one worker each runs.
//!
//! May depend on: `decoy-spec`, `decoy-matching`, `decoy-plugin-host`,
//! `decoy-template`. Must not
//! depend on: transports, the admin API, the binary; and names none of them: a
//! transport registers its metrics under its own name and tells the loader which
//! root files are its own.

pub mod engine;
pub mod filenames;
pub mod files;
pub mod journal;
pub mod latency;
pub mod mapping;
pub mod metrics;
pub mod paths;
pub mod plugins;
pub mod publish;
pub mod recording;
pub mod serve;
pub mod shared;
pub mod store;
pub mod stub_files;
pub mod templates;
pub mod threads;
pub mod webhooks;
