//! `POST /__admin/channels/send`: publish a message now, for test code.
//!
//! WireMock 4 sends a message to its open channels with
//! `{"type": "websocket", "initiatingRequest": {...}, "message": {"body": {"data": ...}}}`
//! and answers `{"sentCount": n}`. decoy's channels are the connections of
//! `mq-connections.json`, so the call names one and a destination in place of the
//! initiating request:
//!
//! ```json
//! {"type": "mq", "connection": "rabbit", "queue": "orders.created",
//!  "message": {"body": {"data": "{\"id\": 1}"}, "properties": {"kind": "created"}}}
//! ```
//!
//! `topic` (MQTT, AMQP's `amq.topic`) or `subject` (NATS) in place of `queue`;
//! `data` may be JSON itself (sent as its text), or `base64Data` binary. It answers
//! once the broker took the message (200 `{"sentCount": 1}`), or says why not: 400
//! for a call that names no valid destination, 422 for a connection that is not
//! configured, 502 when the broker refused it or could not be reached.

use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use super::{Admin, AdminReply, AdminRequest, json as j};
use decoy_core::publish::{MessagePublisher, MessageTarget, OutgoingMessage, PublishError};
use decoy_spec::fields::FieldError;

/// How long the call waits for the broker.
const TIMEOUT: Duration = Duration::from_secs(30);

impl Admin {
    pub(super) fn channels_route(&self, req: &AdminRequest, rest: &[&str]) -> Option<AdminReply> {
        match (req.method.as_str(), rest) {
            ("POST", ["send"]) => Some(self.send_message(req)),
            _ => None,
        }
    }

    fn send_message(&self, req: &AdminRequest) -> AdminReply {
        let message = match parse(&req.body) {
            Ok(m) => m,
            Err(e) => return AdminReply::json(400, j::errors(&[e])),
        };
        let Some(mq) = &self.mq else {
            return AdminReply::json(
                422,
                j::error("Unknown connection", "no MQ connections are configured"),
            );
        };
        let publisher = mq.publisher();
        if !publisher.has_connection(&message.target.connection) {
            let known = publisher.connections();
            return AdminReply::json(
                422,
                j::error(
                    "Unknown connection",
                    &format!(
                        "no connection {:?} in mq-connections.json (connectionId: {})",
                        message.target.connection,
                        if known.is_empty() {
                            "none is configured".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                ),
            );
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return AdminReply::json(500, j::error("Not sent", "no async runtime"));
        };
        let target = message.target.clone();
        let outcome = handle.block_on(async {
            match tokio::time::timeout(TIMEOUT, publisher.publish(message)).await {
                Ok(r) => r,
                Err(_) => Err(PublishError::Broker(format!(
                    "the broker did not take it within {} s",
                    TIMEOUT.as_secs()
                ))),
            }
        });
        let counters = &self.metrics.messages;
        match outcome {
            Ok(()) => {
                counters.published.fetch_add(1, Ordering::Relaxed);
                AdminReply::json(200, json!({ "sentCount": 1 }))
            }
            Err(e) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                AdminReply::json(502, j::error("Not published", &format!("{target}: {e}")))
            }
        }
    }
}

fn parse(body: &[u8]) -> Result<OutgoingMessage, FieldError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| FieldError::new("", format!("not JSON: {e}")))?;
    let Value::Object(o) = &v else {
        return Err(FieldError::new("", "expected a JSON object"));
    };
    match o.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t.eq_ignore_ascii_case("mq") => {}
        Some(other) => {
            return Err(FieldError::new(
                "type",
                format!(
                    "decoy sends to MQ connections only (\"type\": \"mq\"), not {other}: it has no WebSocket channels"
                ),
            ));
        }
    }
    let connection = match o.get("connection") {
        Some(Value::String(c)) if !c.is_empty() => c.clone(),
        _ => {
            return Err(FieldError::new(
                "connection",
                "missing: name the connectionId of a connection in mq-connections.json",
            ));
        }
    };
    let named: Vec<(&str, &Value)> = ["queue", "topic", "subject"]
        .into_iter()
        .filter_map(|k| o.get(k).filter(|v| !v.is_null()).map(|v| (k, v)))
        .collect();
    let (key, destination) = match named.as_slice() {
        [(k, Value::String(d))] if !d.is_empty() => (*k, d.clone()),
        [(k, _)] => {
            return Err(FieldError::new(*k, "expected a non-empty name"));
        }
        [] => {
            return Err(FieldError::new(
                "queue",
                "missing: give \"queue\", \"topic\" (MQTT, AMQP's amq.topic) or \"subject\" (NATS)",
            ));
        }
        [_, (second, _), ..] => {
            return Err(FieldError::new(
                *second,
                "a message goes to one destination: give one of queue, topic and subject",
            ));
        }
    };
    let msg = o.get("message").and_then(Value::as_object);
    let body = msg.and_then(|m| m.get("body"));
    let body = match body {
        None | Some(Value::Null) => Bytes::new(),
        Some(Value::Object(b)) => match (b.get("data"), b.get("base64Data")) {
            (Some(Value::String(s)), None) => Bytes::from(s.clone()),
            (Some(other), None) => Bytes::from(other.to_string()),
            (None, Some(Value::String(b64))) => Bytes::from(
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .map_err(|e| {
                        FieldError::new("message.body.base64Data", format!("not valid base64: {e}"))
                    })?,
            ),
            (None, None) => Bytes::new(),
            _ => {
                return Err(FieldError::new(
                    "message.body",
                    "give \"data\" (text, or JSON) or \"base64Data\", not both",
                ));
            }
        },
        Some(_) => {
            return Err(FieldError::new(
                "message.body",
                "expected {\"data\": ...} (WireMock's message body)",
            ));
        }
    };
    let mut properties = Vec::new();
    match msg.and_then(|m| m.get("properties")) {
        None | Some(Value::Null) => {}
        Some(Value::Object(p)) => {
            for (k, v) in p {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                properties.push((k.clone(), text));
            }
        }
        Some(_) => {
            return Err(FieldError::new(
                "message.properties",
                "expected an object of property names",
            ));
        }
    }
    Ok(OutgoingMessage {
        target: MessageTarget {
            connection,
            destination,
            topic: key == "topic",
        },
        body,
        properties,
    })
}
