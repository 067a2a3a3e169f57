//! decoy's vocabulary: the types every layer speaks, kept on the ground floor so that
//! no layer has to import another's room to use them.
//!
//! - [`request`]: the owned [`RequestSnapshot`](request::RequestSnapshot) a transport
//!   builds once and every matcher, plugin and journal entry reads.
//! - [`kept`]: the [`KeptRequest`](kept::KeptRequest), a request kept after it was
//!   answered (the journal's) in one allocation, read as a snapshot.
//! - [`plan`]: the transport-neutral [`ResponsePlan`](plan::ResponsePlan) and the
//!   delay, dribble and fault vocabulary.
//! - [`header_case`]: the [`HeaderCase`](header_case::HeaderCase) that keeps how a
//!   message's header names were spelled, for reports and recorded files.
//! - [`fields`]: reading a JSON mapping with a path to every field, and the
//!   [`FieldError`](fields::FieldError) that names it.
//!
//! May depend on: nothing of decoy's but `decoy-multipart` (the one multipart parser,
//! shared with the `response-template` plugin). Everything else may depend on it.

pub mod fields;
pub mod header_case;
pub mod kept;
pub mod plan;
pub mod request;
