//! One MQTT client connection, MQTT 3.1.1 or 5, in the few terms decoy needs.
//!
//! `rumqttc` has a module per protocol version with the same shape (a client handle
//! that queues requests, an event loop that does the I/O), but distinct types. This
//! file is the only place that tells them apart: [`Client`] publishes, subscribes
//! and acknowledges, [`EventLoop::poll`] reports [`Event`]s, and [`Raw`] is a
//! received publish kept to be acknowledged.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rumqttc::v5;
use rumqttc::v5::mqttbytes::v5 as p5;

use super::config::{MqttConfig, Version};
use crate::transport::Message;

/// MQTT's largest packet (the remaining length field's limit): decoy takes whatever
/// the broker accepted.
const MAX_PACKET: usize = 268_435_455;
/// Requests (publishes, acks) queued for the event loop before a caller waits.
const REQUESTS: usize = 1024;

#[derive(Clone, Debug)]
pub(super) enum Client {
    V4(rumqttc::AsyncClient),
    V5(v5::AsyncClient),
}

pub(super) enum EventLoop {
    V4(Box<rumqttc::EventLoop>),
    V5(Box<v5::EventLoop>),
}

/// A received publish, as the client library needs it to acknowledge it.
#[derive(Debug, Clone)]
pub(super) enum Raw {
    V4(rumqttc::Publish),
    V5(p5::Publish),
}

/// What the event loop reported.
pub(super) enum Event {
    Connected,
    Publish(Raw),
    /// The broker's answer to a subscribe: the QoS granted, or why it refused.
    SubAck(Vec<Result<u8, String>>),
    /// A publish of ours went out with this packet id (0: QoS 0, nothing to wait for).
    Sent(u16),
    /// The broker took the publish with this packet id: its PUBACK, or at QoS 2 its
    /// PUBREC, which says the broker holds the message (rumqttc frees the packet id
    /// there and may give it to the next publish before the PUBCOMP, so the PUBCOMP
    /// could not be told apart). `Ok(true)` when the broker said no client subscribes
    /// to its topic (MQTT 5).
    Confirmed(u16, Result<bool, Refused>),
    /// The broker ended the session because another client took the same client id.
    TakenOver,
    Other,
}

/// The broker refused a publish of ours (MQTT 5 reason codes).
#[derive(Debug, Clone)]
pub(super) struct Refused {
    pub reason: String,
    /// Refused for good (not authorized, invalid topic): sending it again cannot work.
    pub lasting: bool,
}

fn qos4(q: u8) -> rumqttc::QoS {
    match q {
        0 => rumqttc::QoS::AtMostOnce,
        1 => rumqttc::QoS::AtLeastOnce,
        _ => rumqttc::QoS::ExactlyOnce,
    }
}

fn qos5(q: u8) -> v5::mqttbytes::QoS {
    match q {
        0 => v5::mqttbytes::QoS::AtMostOnce,
        1 => v5::mqttbytes::QoS::AtLeastOnce,
        _ => v5::mqttbytes::QoS::ExactlyOnce,
    }
}

/// The TLS set-up of an `mqtts://` connection: the system's roots, or `caFile`'s.
fn tls(config: &MqttConfig) -> Result<rumqttc::Transport, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    match &config.ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("cannot read caFile {}: {e}", path.display()))?;
            for c in certs {
                let c = c.map_err(|e| format!("caFile {}: {e}", path.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("caFile {}: {e}", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for c in found.certs {
                let _ = roots.add(c);
            }
            if roots.is_empty() {
                return Err(
                    "no trusted root certificates found on this system; name one with caFile"
                        .into(),
                );
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(rumqttc::Transport::tls_with_config(
        rumqttc::TlsConfiguration::Rustls(Arc::new(tls)),
    ))
}

/// The socket options of every connection: `TCP_NODELAY`, as a service answering
/// requests wants. rumqttc leaves Nagle's algorithm on, and a connection that only
/// publishes at QoS 0 (a reply connection) gets nothing back from the broker to
/// carry its TCP acknowledgements: each small reply then waited for the broker's
/// delayed acknowledgement of the one before (up to 40 ms on Linux), which is what
/// `bench/mqtt.py` saw as a p99 of 45 ms and a third of the bare echo's rate.
fn network() -> rumqttc::NetworkOptions {
    let mut n = rumqttc::NetworkOptions::new();
    n.set_tcp_nodelay(true);
    n
}

/// A client and its event loop (not yet connected: the first poll connects).
/// `receiver`: acknowledgements are decoy's (manual acks), and the session is kept
/// unless the connection says `cleanSession` or `fresh` asks for a new one.
pub(super) fn new(
    config: &MqttConfig,
    client_id: String,
    receiver: bool,
    fresh: bool,
) -> Result<(Client, EventLoop), String> {
    let transport = if config.tls { Some(tls(config)?) } else { None };
    let clean = !receiver || config.clean_session || fresh;
    Ok(match config.version {
        Version::V311 => {
            let mut o = rumqttc::MqttOptions::new(client_id, &config.host, config.port);
            o.set_keep_alive(config.keep_alive)
                .set_clean_session(clean)
                .set_manual_acks(receiver)
                .set_max_packet_size(MAX_PACKET, MAX_PACKET)
                .set_inflight(100);
            if let Some(u) = &config.username {
                o.set_credentials(u, config.password.as_deref().unwrap_or(""));
            }
            if let Some(t) = transport {
                o.set_transport(t);
            }
            let (c, mut l) = rumqttc::AsyncClient::new(o, REQUESTS);
            l.set_network_options(network());
            (Client::V4(c), EventLoop::V4(Box::new(l)))
        }
        Version::V5 => {
            let mut o = v5::MqttOptions::new(client_id, &config.host, config.port);
            o.set_keep_alive(config.keep_alive)
                .set_clean_start(clean)
                .set_manual_acks(receiver)
                .set_max_packet_size(Some(MAX_PACKET as u32));
            if receiver && !clean {
                o.set_session_expiry_interval(Some(config.session_expiry));
            }
            if receiver {
                o.set_receive_maximum(Some(config.prefetch));
            }
            if let Some(u) = &config.username {
                o.set_credentials(u, config.password.as_deref().unwrap_or(""));
            }
            if let Some(t) = transport {
                o.set_transport(t);
            }
            o.set_network_options(network());
            let (c, l) = v5::AsyncClient::new(o, REQUESTS);
            (Client::V5(c), EventLoop::V5(Box::new(l)))
        }
    })
}

impl Client {
    pub async fn subscribe(&self, filter: &str) -> Result<(), String> {
        // QoS 2: each request keeps the QoS it was published with.
        match self {
            Client::V4(c) => c
                .subscribe(filter, qos4(2))
                .await
                .map_err(|e| e.to_string()),
            Client::V5(c) => c
                .subscribe(filter, qos5(2))
                .await
                .map_err(|e| e.to_string()),
        }
    }

    /// Queues `message` for `topic`; the event loop reports it [`Event::Sent`].
    pub async fn publish(&self, topic: &str, message: &Message) -> Result<(), String> {
        let qos = message.qos.unwrap_or(1);
        match self {
            Client::V4(c) => c
                .publish_bytes(topic, qos4(qos), message.retain, message.body.clone())
                .await
                .map_err(|e| e.to_string()),
            Client::V5(c) => {
                let p = p5::PublishProperties {
                    response_topic: message.reply_to.clone(),
                    correlation_data: message.correlation_id.clone().map(Bytes::from),
                    user_properties: message.properties.clone(),
                    content_type: message.format.clone().filter(|f| f.contains('/')),
                    ..Default::default()
                };
                c.publish_bytes_with_properties(
                    topic,
                    qos5(qos),
                    message.retain,
                    message.body.clone(),
                    p,
                )
                .await
                .map_err(|e| e.to_string())
            }
        }
    }

    /// Acknowledges a received publish (PUBACK, or PUBREC at QoS 2; nothing at 0).
    pub async fn ack(&self, raw: &Raw) -> Result<(), String> {
        match (self, raw) {
            (Client::V4(c), Raw::V4(p)) => c.ack(p).await.map_err(|e| e.to_string()),
            (Client::V5(c), Raw::V5(p)) => c.ack(p).await.map_err(|e| e.to_string()),
            _ => Err("a publish acknowledged on a client of another MQTT version".into()),
        }
    }
}

impl EventLoop {
    pub async fn poll(&mut self) -> Result<Event, String> {
        match self {
            EventLoop::V4(l) => {
                use rumqttc::{Event as E, Outgoing, Packet};
                Ok(match l.poll().await.map_err(|e| e.to_string())? {
                    E::Incoming(Packet::ConnAck(_)) => Event::Connected,
                    E::Incoming(Packet::Publish(p)) => Event::Publish(Raw::V4(p)),
                    E::Incoming(Packet::SubAck(s)) => Event::SubAck(
                        s.return_codes
                            .iter()
                            .map(|c| match c {
                                rumqttc::SubscribeReasonCode::Success(q) => Ok(*q as u8),
                                rumqttc::SubscribeReasonCode::Failure => {
                                    Err("the broker refused it (failure)".to_owned())
                                }
                            })
                            .collect(),
                    ),
                    E::Incoming(Packet::PubAck(a)) => Event::Confirmed(a.pkid, Ok(false)),
                    E::Incoming(Packet::PubRec(r)) => Event::Confirmed(r.pkid, Ok(false)),
                    E::Outgoing(Outgoing::Publish(pkid)) => Event::Sent(pkid),
                    _ => Event::Other,
                })
            }
            EventLoop::V5(l) => {
                use rumqttc::Outgoing;
                use v5::Event as E;
                use v5::mqttbytes::v5::Packet;
                Ok(match l.poll().await.map_err(|e| e.to_string())? {
                    E::Incoming(Packet::ConnAck(_)) => Event::Connected,
                    E::Incoming(Packet::Publish(p)) => Event::Publish(Raw::V5(p)),
                    E::Incoming(Packet::SubAck(s)) => Event::SubAck(
                        s.return_codes
                            .iter()
                            .map(|c| match c {
                                p5::SubscribeReasonCode::Success(q) => Ok(*q as u8),
                                other => Err(format!("the broker refused it ({other:?})")),
                            })
                            .collect(),
                    ),
                    E::Incoming(Packet::PubAck(a)) => Event::Confirmed(a.pkid, puback(&a.reason)),
                    E::Incoming(Packet::PubRec(r)) => Event::Confirmed(r.pkid, pubrec(&r.reason)),
                    E::Incoming(Packet::Disconnect(d))
                        if d.reason_code == p5::DisconnectReasonCode::SessionTakenOver =>
                    {
                        Event::TakenOver
                    }
                    E::Outgoing(Outgoing::Publish(pkid)) => Event::Sent(pkid),
                    _ => Event::Other,
                })
            }
        }
    }
}

fn refused(reason: String, lasting: bool) -> Refused {
    Refused { reason, lasting }
}

fn puback(r: &p5::PubAckReason) -> Result<bool, Refused> {
    use p5::PubAckReason as R;
    match r {
        R::Success => Ok(false),
        R::NoMatchingSubscribers => Ok(true),
        R::NotAuthorized | R::TopicNameInvalid | R::PayloadFormatInvalid => {
            Err(refused(format!("the broker refused it: {r:?}"), true))
        }
        other => Err(refused(format!("the broker refused it: {other:?}"), false)),
    }
}

fn pubrec(r: &p5::PubRecReason) -> Result<bool, Refused> {
    use p5::PubRecReason as R;
    match r {
        R::Success => Ok(false),
        R::NoMatchingSubscribers => Ok(true),
        R::NotAuthorized | R::TopicNameInvalid | R::PayloadFormatInvalid => {
            Err(refused(format!("the broker refused it: {r:?}"), true))
        }
        other => Err(refused(format!("the broker refused it: {other:?}"), false)),
    }
}

impl Raw {
    pub fn qos(&self) -> u8 {
        match self {
            Raw::V4(p) => p.qos as u8,
            Raw::V5(p) => p.qos as u8,
        }
    }

    /// The topic it was published on.
    pub fn topic(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Raw::V4(p) => std::borrow::Cow::Borrowed(p.topic.as_str()),
            Raw::V5(p) => String::from_utf8_lossy(&p.topic),
        }
    }

    /// The transport-neutral message: MQTT 5's user properties are its properties,
    /// its response topic the reply-to, its correlation data the correlation id.
    /// The payload and the properties are moved out (an acknowledgement needs only
    /// the packet id and the QoS), so they are not copied per message.
    pub fn take_message(&mut self) -> Message {
        match self {
            Raw::V4(p) => Message {
                body: std::mem::take(&mut p.payload),
                topic: Some(p.topic.clone()),
                qos: Some(p.qos as u8),
                persistent: p.qos as u8 > 0,
                retain: p.retain,
                ..Message::default()
            },
            Raw::V5(p) => {
                let props = p.properties.take().unwrap_or_default();
                Message {
                    body: std::mem::take(&mut p.payload),
                    topic: Some(String::from_utf8_lossy(&p.topic).into_owned()),
                    qos: Some(p.qos as u8),
                    persistent: p.qos as u8 > 0,
                    retain: p.retain,
                    properties: props.user_properties,
                    reply_to: props.response_topic,
                    correlation_id: props.correlation_data.map(|b| b.to_vec()),
                    format: props.content_type,
                    ..Message::default()
                }
            }
        }
    }
}

/// How long the first connect may take.
pub(super) async fn connect(l: &mut EventLoop, within: Duration) -> Result<(), String> {
    let connected = async {
        loop {
            if let Event::Connected = l.poll().await? {
                return Ok::<(), String>(());
            }
        }
    };
    match tokio::time::timeout(within, connected).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer from the broker in {within:?}")),
    }
}
