//! Message-queue virtual services: a request message put on a queue gets the mapped
//! reply on its reply-to queue, as a real back end would send it.
//!
//! - [`config`]: `mq-connections.json` and `mq-mappings/` (and Traffic Parrot's
//!   names), parsed with the same error style as HTTP mappings.
//! - [`transport`]: the small broker interface (receive, settle, send).
//! - [`runtime`]: receivers, the bounded hand-off, senders; matching, delays,
//!   at-least-once settlement, reconnects, draining on shutdown.
//! - [`amqp`]: RabbitMQ and other AMQP 0-9-1 brokers, with `lapin`.
//! - [`memory`]: an in-process broker for the runtime's own tests.

pub mod amqp;
pub mod config;
pub mod memory;
pub mod runtime;
pub mod transport;

use std::sync::Arc;

use anyhow::bail;

use crate::metrics::{MappingStats, Metrics};
use config::{ConnectionKind, MqLoad};
use runtime::MqRuntime;
use transport::Broker;

/// Starts serving the MQ mappings of `load`; `Ok(None)` when there are none.
/// Brokers that cannot be reached yet are retried in the background, so an HTTP
/// mock still starts while RabbitMQ is restarting.
pub fn start(load: MqLoad, metrics: &Arc<Metrics>) -> anyhow::Result<Option<MqRuntime>> {
    if load.mappings.is_empty() {
        return Ok(None);
    }
    let mut brokers: Vec<Arc<dyn Broker>> = Vec::new();
    for c in &load.connections {
        match &c.kind {
            ConnectionKind::Amqp(a) => brokers.push(Arc::new(amqp::AmqpBroker::new(a.clone()))),
            ConnectionKind::IbmMq(_) => bail!(
                "connection {:?} is an IBM MQ connection, which this build cannot serve yet; \
                 remove its mappings or serve them with an AMQP connection",
                c.id
            ),
        }
    }
    let mappings: Vec<(Arc<config::MqMapping>, Arc<MappingStats>)> = load
        .mappings
        .into_iter()
        .map(|m| (Arc::new(m), Arc::new(MappingStats::default())))
        .collect();
    metrics.set_mq_mappings(
        mappings
            .iter()
            .map(|(m, s)| (m.id.clone(), m.name.clone(), s.clone()))
            .collect(),
    );
    let metrics = metrics.clone();
    Ok(Some(MqRuntime::start(
        &load.connections,
        brokers,
        mappings,
        move |c| match c.kind {
            ConnectionKind::Amqp(_) => metrics.amqp.clone(),
            ConnectionKind::IbmMq(_) => metrics.ibm_mq.clone(),
        },
    )))
}
