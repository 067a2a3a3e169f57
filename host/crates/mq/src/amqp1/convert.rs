//! AMQP 1.0 messages to and from decoy's broker-neutral [`Message`].
//!
//! - Body: an `amqp-value` string (what JMS TextMessages and most clients send for
//!   text) is text, marked with the `MQSTR` format so its reply is text too; `data`
//!   sections are bytes; any other value (a map, a list, a number) is shown as JSON,
//!   so matchers still see it. A reply is an `amqp-value` string when its format is
//!   `MQSTR` (the default) and its body is UTF-8, else one `data` section.
//! - Message and correlation ids may be strings, numbers, UUIDs or binary. A string
//!   stays as it is; the others are written as Qpid JMS writes them
//!   (`AMQP_ULONG:7`, `AMQP_UUID:…`, `AMQP_BINARY:0A1B`), and read back to the same
//!   type when they become the reply's correlation id, so a client comparing ids by
//!   type finds its reply.
//! - Application properties are properties, their values as text.

use bytes::Bytes;
use fe2o3_amqp::types::messaging::{
    AmqpValue, ApplicationProperties, Batch, Body, Data, Header, Message as AmqpMessage, MessageId,
    Properties,
};
use fe2o3_amqp::types::primitives::{Binary, SimpleValue, Symbol, Uuid, Value};

use crate::transport::Message;

/// What a received message's body and ids become.
pub fn from_amqp(m: AmqpMessage<Body<Value>>) -> Message {
    let (body, text) = match m.body {
        Body::Value(AmqpValue(Value::String(s))) => (Bytes::from(s), true),
        Body::Value(AmqpValue(Value::Binary(b))) => (Bytes::from(b.into_vec()), false),
        Body::Value(AmqpValue(Value::Null)) | Body::Empty => (Bytes::new(), false),
        Body::Value(AmqpValue(v)) => (Bytes::from(to_json(&v).to_string()), true),
        Body::Data(batch) => {
            let mut out = Vec::new();
            for Data(d) in batch {
                out.extend_from_slice(&d);
            }
            (Bytes::from(out), false)
        }
        Body::Sequence(batch) => {
            let items: Vec<serde_json::Value> = batch
                .into_iter()
                .flat_map(|s| s.0.into_iter().map(|v| to_json(&v)))
                .collect();
            (
                Bytes::from(serde_json::Value::from(items).to_string()),
                true,
            )
        }
    };
    let p = m.properties.unwrap_or_default();
    let content_type = p.content_type.map(|Symbol(s)| s);
    Message {
        body,
        properties: m
            .application_properties
            .map(|a| a.0.into_iter().map(|(k, v)| (k, simple_text(&v))).collect())
            .unwrap_or_default(),
        message_id: p.message_id.as_ref().map(id_text),
        correlation_id: p.correlation_id.as_ref().map(id_text),
        reply_to: p.reply_to,
        reply_to_manager: None,
        format: if text {
            Some("MQSTR".into())
        } else {
            content_type
        },
        message_type: p.subject,
        persistent: m.header.is_some_and(|h| h.durable),
        ..Message::default()
    }
}

/// The AMQP 1.0 message for `m`.
pub fn to_amqp(m: Message) -> AmqpMessage<Body<Value>> {
    let text = m.format.as_deref() == Some("MQSTR");
    let body = match (text, String::from_utf8(m.body.to_vec())) {
        (true, Ok(s)) => Body::Value(AmqpValue(Value::String(s))),
        _ => Body::Data(Batch::new(vec![Data(Binary::from(m.body.to_vec()))])),
    };
    let properties = Properties {
        message_id: m.message_id.as_deref().map(id_value),
        correlation_id: m.correlation_id.as_deref().map(id_value),
        reply_to: m.reply_to,
        // An MQ format name is not a content type; only a real one is passed on.
        content_type: m.format.filter(|f| f.contains('/')).map(Symbol::from),
        ..Properties::default()
    };
    let application_properties = (!m.properties.is_empty()).then(|| {
        ApplicationProperties(
            m.properties
                .into_iter()
                .map(|(k, v)| (k, SimpleValue::String(v)))
                .collect(),
        )
    });
    AmqpMessage {
        header: m.persistent.then(|| Header {
            durable: true,
            ..Header::default()
        }),
        delivery_annotations: None,
        message_annotations: None,
        properties: Some(properties),
        application_properties,
        body,
        footer: None,
    }
}

const ULONG: &str = "AMQP_ULONG:";
const UUID: &str = "AMQP_UUID:";
const BINARY: &str = "AMQP_BINARY:";
const STRING: &str = "AMQP_STRING:";

/// An id as text (Qpid JMS's encoding for the types that are not strings).
fn id_text(id: &MessageId) -> Vec<u8> {
    match id {
        MessageId::String(s)
            if [ULONG, UUID, BINARY, STRING]
                .iter()
                .any(|p| s.starts_with(p)) =>
        {
            format!("{STRING}{s}").into_bytes()
        }
        MessageId::String(s) => s.clone().into_bytes(),
        MessageId::Ulong(n) => format!("{ULONG}{n}").into_bytes(),
        MessageId::Uuid(u) => {
            let bytes: [u8; 16] = u.clone().into();
            format!("{UUID}{}", uuid::Uuid::from_bytes(bytes)).into_bytes()
        }
        MessageId::Binary(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
            format!("{BINARY}{hex}").into_bytes()
        }
    }
}

/// The id `id_text` made, of its own type again; any other text is a string id.
fn id_value(text: &[u8]) -> MessageId {
    let s = String::from_utf8_lossy(text).into_owned();
    if let Some(n) = s.strip_prefix(ULONG).and_then(|n| n.parse().ok()) {
        return MessageId::Ulong(n);
    }
    if let Some(u) = s
        .strip_prefix(UUID)
        .and_then(|u| uuid::Uuid::parse_str(u).ok())
    {
        return MessageId::Uuid(Uuid::from(u.into_bytes()));
    }
    if let Some(b) = s.strip_prefix(BINARY).and_then(unhex) {
        return MessageId::Binary(Binary::from(b));
    }
    match s.strip_prefix(STRING) {
        Some(rest) => MessageId::String(rest.to_owned()),
        None => MessageId::String(s),
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

fn simple_text(v: &SimpleValue) -> String {
    match v {
        SimpleValue::String(s) => s.clone(),
        SimpleValue::Symbol(Symbol(s)) => s.clone(),
        other => match to_json(&Value::from(other.clone())) {
            serde_json::Value::String(s) => s,
            j => j.to_string(),
        },
    }
}

/// An AMQP value as JSON, for matching and templates.
fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::from(*b),
        Value::Ubyte(n) => J::from(*n),
        Value::Ushort(n) => J::from(*n),
        Value::Uint(n) => J::from(*n),
        Value::Ulong(n) => J::from(*n),
        Value::Byte(n) => J::from(*n),
        Value::Short(n) => J::from(*n),
        Value::Int(n) => J::from(*n),
        Value::Long(n) => J::from(*n),
        Value::Float(f) => J::from(f.into_inner()),
        Value::Double(f) => J::from(f.into_inner()),
        Value::Char(c) => J::from(c.to_string()),
        Value::Timestamp(t) => J::from(t.milliseconds()),
        Value::Uuid(u) => {
            let bytes: [u8; 16] = u.clone().into();
            J::from(uuid::Uuid::from_bytes(bytes).to_string())
        }
        Value::Binary(b) => J::from(String::from_utf8_lossy(b).into_owned()),
        Value::String(s) => J::from(s.clone()),
        Value::Symbol(Symbol(s)) => J::from(s.clone()),
        Value::List(l) => J::from(l.iter().map(to_json).collect::<Vec<_>>()),
        Value::Array(a) => J::from(a.0.iter().map(to_json).collect::<Vec<_>>()),
        Value::Map(m) => J::Object(
            m.iter()
                .map(|(k, v)| {
                    let key = match to_json(k) {
                        J::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Value::Described(d) => to_json(&d.value),
        other => J::from(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_every_type_come_back_as_the_same_type() {
        let ids = [
            MessageId::String("ID:abc".into()),
            MessageId::String("AMQP_ULONG:not really".into()),
            MessageId::Ulong(42),
            MessageId::Uuid(Uuid::from(uuid::Uuid::from_u128(7).into_bytes())),
            MessageId::Binary(Binary::from(vec![0, 0xAB])),
        ];
        for id in ids {
            assert_eq!(id_value(&id_text(&id)), id);
        }
        assert_eq!(id_text(&MessageId::Ulong(42)), b"AMQP_ULONG:42");
    }

    #[test]
    fn text_stays_text_and_data_stays_data_through_a_reply() {
        let text = AmqpMessage {
            header: None,
            delivery_annotations: None,
            message_annotations: None,
            properties: None,
            application_properties: Some(ApplicationProperties(
                [
                    ("kind".to_owned(), SimpleValue::String("vip".into())),
                    ("n".to_owned(), SimpleValue::Int(3)),
                ]
                .into_iter()
                .collect(),
            )),
            body: Body::Value(AmqpValue(Value::String("héllo".into()))),
            footer: None,
        };
        let m = from_amqp(text);
        assert_eq!(&m.body[..], "héllo".as_bytes());
        assert_eq!(m.format.as_deref(), Some("MQSTR"));
        assert_eq!(
            m.properties,
            [("kind".into(), "vip".into()), ("n".into(), "3".into())]
        );
        let back = to_amqp(m);
        assert!(matches!(back.body, Body::Value(AmqpValue(Value::String(ref s))) if s == "héllo"));

        let mut m = from_amqp(AmqpMessage {
            header: Some(Header {
                durable: true,
                ..Header::default()
            }),
            delivery_annotations: None,
            message_annotations: None,
            properties: None,
            application_properties: None,
            body: Body::Data(Batch::new(vec![
                Data(Binary::from(vec![1, 2])),
                Data(Binary::from(vec![3])),
            ])),
            footer: None,
        });
        assert_eq!(&m.body[..], &[1, 2, 3]);
        assert!(m.persistent);
        assert_eq!(m.format, None);
        m.format = Some("application/octet-stream".into());
        let back = to_amqp(m);
        assert!(matches!(back.body, Body::Data(_)));
        assert!(back.header.is_some_and(|h| h.durable));
    }

    #[test]
    fn a_map_body_is_matched_as_json() {
        let map = [(Value::String("symbol".into()), Value::String("ACME".into()))]
            .into_iter()
            .collect();
        let m = from_amqp(AmqpMessage {
            header: None,
            delivery_annotations: None,
            message_annotations: None,
            properties: None,
            application_properties: None,
            body: Body::Value(AmqpValue(Value::Map(map))),
            footer: None,
        });
        assert_eq!(&m.body[..], br#"{"symbol":"ACME"}"#);
    }
}
