//! The MQTT tests' system under test: an MQTT 5 client (rumqttc) that publishes
//! requests and counts the replies by their correlation data, against the machine's
//! Mosquitto (127.0.0.1:1883, anonymous; `DECOY_MQTT_URL` points elsewhere) or a
//! private one (`brokers::Mosquitto`). Each test uses topics of its own under
//! `decoy-test/<uuid>/`.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use rumqttc::v5;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Packet, PublishProperties};
use serde_json::json;
use tokio::sync::mpsc;

pub fn url() -> String {
    std::env::var("DECOY_MQTT_URL").unwrap_or_else(|_| "mqtt://127.0.0.1:1883".into())
}

pub fn host_port(url: &str) -> (String, u16) {
    let rest = url.trim_start_matches("mqtt://");
    let (h, p) = rest.rsplit_once(':').unwrap_or((rest, "1883"));
    (h.to_owned(), p.parse().unwrap())
}

pub fn base() -> String {
    format!("decoy-test/{}", uuid::Uuid::new_v4().simple())
}

/// A received message: topic, body, correlation data, user properties, retain flag.
#[derive(Debug, Clone)]
pub struct Got {
    pub topic: String,
    pub body: String,
    pub correlation: Option<Bytes>,
    pub properties: Vec<(String, String)>,
    pub qos: u8,
}

/// An MQTT 5 client as the system under test: publishes requests, receives on the
/// topics it subscribed to.
pub struct Client5 {
    client: v5::AsyncClient,
    got: mpsc::UnboundedReceiver<Got>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Client5 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Client5 {
    /// Connected and subscribed to `topics` (each SUBACK seen).
    pub async fn connect(url: &str, id: &str, clean: bool, topics: &[&str]) -> Client5 {
        let (host, port) = host_port(url);
        let mut o = v5::MqttOptions::new(id, host, port);
        o.set_keep_alive(Duration::from_secs(10))
            .set_clean_start(clean);
        if !clean {
            o.set_session_expiry_interval(Some(600));
        }
        let (client, mut events) = v5::AsyncClient::new(o, 1000);
        let (tx, got) = mpsc::unbounded_channel();
        let (suback_tx, mut subacks) = mpsc::unbounded_channel();
        let (again, filters) = (
            client.clone(),
            topics.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>(),
        );
        let mut connects = 0;
        let task = tokio::spawn(async move {
            loop {
                match events.poll().await {
                    // Subscribed again on every reconnect, as a careful client does
                    // (Mosquitto restores persisted sessions without their
                    // subscriptions).
                    Ok(v5::Event::Incoming(Packet::ConnAck(_))) => {
                        connects += 1;
                        if connects > 1 {
                            for f in &filters {
                                let _ = again.try_subscribe(f.clone(), QoS::ExactlyOnce);
                            }
                        }
                    }
                    Ok(v5::Event::Incoming(Packet::Publish(p))) => {
                        let props = p.properties.clone().unwrap_or_default();
                        let _ = tx.send(Got {
                            topic: String::from_utf8_lossy(&p.topic).into_owned(),
                            body: String::from_utf8_lossy(&p.payload).into_owned(),
                            correlation: props.correlation_data,
                            properties: props.user_properties,
                            qos: p.qos as u8,
                        });
                    }
                    Ok(v5::Event::Incoming(Packet::SubAck(_))) => {
                        let _ = suback_tx.send(());
                    }
                    Ok(_) => {}
                    // The broker is away (the restart test): try again shortly.
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
        for t in topics {
            client.subscribe(*t, QoS::ExactlyOnce).await.unwrap();
        }
        for _ in topics {
            tokio::time::timeout(Duration::from_secs(10), subacks.recv())
                .await
                .expect("SUBACK in 10 s")
                .unwrap();
        }
        Client5 { client, got, task }
    }

    /// [`Client5::connect`] with a client id of its own (`sut-<uuid>`).
    pub async fn connect_sut(url: &str, clean: bool, topics: &[&str]) -> Client5 {
        let id = format!("sut-{}", uuid::Uuid::new_v4().simple());
        Client5::connect(url, &id, clean, topics).await
    }

    pub async fn request(
        &self,
        topic: &str,
        body: &str,
        qos: QoS,
        response_topic: Option<&str>,
        correlation: &str,
        user: &[(&str, &str)],
    ) {
        let props = PublishProperties {
            response_topic: response_topic.map(str::to_owned),
            correlation_data: Some(Bytes::from(correlation.to_owned())),
            user_properties: user
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        };
        self.client
            .publish_with_properties(topic, qos, false, body.to_owned(), props)
            .await
            .unwrap();
    }

    /// Publishes the request `order` on `topic` at QoS 1 for each of `ids`, with
    /// `replies` as its response topic and `o-ID` as its correlation data.
    pub async fn orders(&self, topic: &str, replies: &str, ids: std::ops::Range<usize>) {
        for i in ids {
            self.request(
                topic,
                "order",
                QoS::AtLeastOnce,
                Some(replies),
                &format!("o-{i}"),
                &[],
            )
            .await;
        }
    }

    pub async fn next(&mut self, wait: Duration) -> Option<Got> {
        tokio::time::timeout(wait, self.got.recv())
            .await
            .ok()
            .flatten()
    }

    /// Replies until every correlation in `want` is seen (or `wait` passes); the
    /// replies by correlation.
    pub async fn collect(&mut self, want: usize, wait: Duration) -> HashMap<String, Vec<Got>> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut seen: HashMap<String, Vec<Got>> = HashMap::new();
        while seen.len() < want {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(g) = self.next(left).await else {
                break;
            };
            let c = g
                .correlation
                .as_ref()
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .unwrap_or_default();
            if c != "probe" {
                seen.entry(c).or_default().push(g);
            }
        }
        seen
    }
}

/// `mq-connections.json` with one MQTT connection to `url`, with `extra` fields.
pub fn connection(id: &str, url: &str, extra: serde_json::Value) -> String {
    super::mq::connections(
        id,
        super::mq::with(json!({"type": "mqtt", "uri": url}), extra),
    )
}

/// Publishes a probe until decoy answers it: decoy subscribes in the background once
/// serving starts, and a publication made before that reaches nobody.
pub async fn until_served(c: &mut Client5, topic: &str, reply: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        c.request(topic, "probe", QoS::AtLeastOnce, Some(reply), "probe", &[])
            .await;
        if let Some(g) = c.next(Duration::from_millis(500)).await {
            assert_eq!(g.correlation.as_deref(), Some(&b"probe"[..]), "{g:?}");
            // Later answers to earlier probes are drained.
            while c.next(Duration::from_millis(300)).await.is_some() {}
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "decoy never answered on {topic}"
        );
    }
}
