//! A write connection's thread: putting (or publishing) replies outside syncpoint,
//! each with a descriptor built field by field.

use super::*;

pub(super) fn write_thread<L: MqLibrary>(
    lib: L,
    config: &IbmMqConfig,
    commands: &std_mpsc::Receiver<WriteCommand>,
    alive: &AtomicBool,
) {
    let conn = match connect(lib, config) {
        Ok(c) => c,
        Err(e) => {
            alive.store(false, Ordering::Release);
            while let Ok(WriteCommand::Put { done, .. }) = commands.try_recv() {
                let _ = done.send(Err(e.clone()));
            }
            return;
        }
    };
    let mut open: Outputs<'_, L> = HashMap::new();
    while let Ok(WriteCommand::Put { to, message, done }) = commands.recv() {
        let result = put(&conn, &mut open, &to, &message);
        let broken = matches!(&result, Err((_, true)));
        let _ = done.send(result.map_err(|(e, _)| e));
        if broken {
            alive.store(false, Ordering::Release);
            tracing::warn!(
                "IBM MQ write connection to {} lost; it will be opened again",
                describe(config)
            );
            break;
        }
    }
    alive.store(false, Ordering::Release);
    drop(open);
    let _ = conn.disconnect();
}

/// The 8-character MQMD format for a mapping's format name (`MQSTR` → `MQSTR   `).
pub(super) fn format_field(name: Option<&str>) -> mqi::MqChar<8> {
    let mut f = [b' ' as libmqm_sys::MQCHAR; 8];
    for (to, from) in f.iter_mut().zip(name.unwrap_or("MQSTR").bytes()) {
        *to = from as libmqm_sys::MQCHAR;
    }
    f
}

pub(super) fn id24(id: Option<&Vec<u8>>) -> Option<[u8; 24]> {
    id.map(|id| {
        let mut out = [0u8; 24];
        for (to, from) in out.iter_mut().zip(id) {
            *to = *from;
        }
        out
    })
}

/// The open output objects of a write connection, by destination and queue manager.
pub(super) type Outputs<'c, L> = HashMap<(Destination, Option<String>), Object<&'c Conn<L>>>;

/// Puts (or publishes) `message` outside syncpoint. The error says whether the
/// connection is lost.
pub(super) fn put<'c, L: MqLibrary>(
    conn: &'c Conn<L>,
    open: &mut Outputs<'c, L>,
    to: &Destination,
    message: &Message,
) -> Result<Put, (BrokerError, bool)> {
    let not_lost = |e: BrokerError| (e, false);
    let message_type = match message.message_type.as_deref() {
        Some("request") => constants::MQMT_REQUEST,
        Some("datagram") => constants::MQMT_DATAGRAM,
        Some("report") => constants::MQMT_REPORT,
        _ => constants::MQMT_REPLY,
    };
    // A reply goes to the queue manager its request named (ReplyToQMgr); blank means
    // the one decoy is connected to.
    let target_qm = message
        .reply_to_manager
        .clone()
        .filter(|_| message_type == constants::MQMT_REPLY && !to.topic);
    let key = (to.clone(), target_qm);
    if !open.contains_key(&key) {
        if open.len() >= OPEN_OUTPUTS {
            open.clear();
        }
        let output = constants::MQOO_OUTPUT | constants::MQOO_FAIL_IF_QUIESCING;
        let opened = if to.topic {
            Object::open(conn, &(ObjectString(to.name.as_str()), output))
        } else {
            let name = QueueName::from_str(&to.name)
                .map_err(|e| not_lost(mq_err(format!("queue name {:?}", to.name), e)))?;
            let qm = key
                .1
                .as_deref()
                .map(QueueManagerName::from_str)
                .transpose()
                .map_err(|e| not_lost(mq_err("reply-to queue manager name", e)))?;
            Object::open(conn, &(name, qm, output))
        };
        let object = match opened {
            Ok(o) => o.discard_warning(),
            Err(e) if unknown_destination(e.2) => {
                // As RabbitMQ returns a message for a queue that does not exist: the
                // runtime decides (a reply is dropped, an unmatched message kept).
                tracing::debug!("no queue for a message to {to}: {e}");
                return Ok(Put::NoSuchQueue);
            }
            Err(e) => {
                return Err((
                    mq_err(format!("cannot open {to} for output"), &e),
                    connection_lost(e.2),
                ));
            }
        };
        open.insert(key.clone(), object);
    }
    let correl = id24(message.correlation_id.as_ref()).map(CorrelationId);
    // A reply gets a new message id; a message moved to the unmatched queue keeps
    // its own, and its reply-to, so it can still be answered by hand.
    let msg_id = id24(message.message_id.as_ref()).map(MessageId);
    let new_id = msg_id.is_none().then_some(constants::MQPMO_NEW_MSG_ID);
    let reply_to = message
        .reply_to
        .as_deref()
        .filter(|_| message_type != constants::MQMT_REPLY)
        .and_then(|q| ReplyToQueueName::from_str(q).ok());
    let reply_to_qm = message
        .reply_to_manager
        .as_deref()
        .filter(|_| message_type != constants::MQMT_REPLY)
        .and_then(|q| ReplyToQueueManagerName::from_str(q).ok());
    // The reply's properties (`response.properties`) go in a message handle.
    let mut properties = if message.properties.is_empty() {
        None
    } else {
        let p = Properties::new(conn, MQCMHO::default())
            .map_err(|e| (mq_err("MQCRTMH failed", &e), connection_lost(e.2)))?;
        for (name, value) in &message.properties {
            p.set_property(name.as_str(), value.as_str(), constants::MQSMPO_SET_FIRST)
                .map_err(|e| {
                    (
                        mq_err(format!("cannot set the property {name:?}"), &e),
                        connection_lost(e.2),
                    )
                })?
                .discard_warning();
        }
        Some(p)
    };
    // The request's persistence (MQ's convention for replies): a persistent request
    // never gets a reply a queue manager restart can lose.
    let persistence = if message.persistent {
        constants::MQPER_PERSISTENT
    } else {
        constants::MQPER_NOT_PERSISTENT
    };
    // (mqi takes tuples of up to 8 options; a nested tuple is one option.)
    let options = (
        (
            constants::MQPMO_NO_SYNCPOINT | constants::MQPMO_FAIL_IF_QUIESCING,
            persistence,
        ),
        new_id,
        message_type,
        correl,
        msg_id,
        reply_to,
        reply_to_qm,
        properties.as_mut(),
    );
    let format = MessageFormat {
        ccsid: CCSID(1208),
        encoding: constants::MQENC_NATIVE,
        fmt: TextEnc::Ascii(format_field(message.format.as_deref())),
    };
    let object = &open[&key];
    match object.put_message(&options, &(&message.body[..], format)) {
        Ok(_) => Ok(Put::Done),
        Err(e) => {
            // The queue may have been deleted or put-inhibited: open it afresh next time.
            open.remove(&key);
            Err((
                mq_err(format!("MQPUT to {to} failed"), &e),
                connection_lost(e.2),
            ))
        }
    }
}
