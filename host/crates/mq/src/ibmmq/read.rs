//! A read connection's thread: opening the receivers' queues and topics, getting
//! under syncpoint, reading properties, and committing or backing out units of work.

use super::*;

/// One open input queue (or a topic subscription's managed queue) of a read
/// connection.
pub(super) struct Input<'c, L: MqLibrary> {
    name: String,
    object: Object<&'c Conn<L>>,
    /// For a topic: the non-durable subscription, removed when this is dropped.
    _subscription: Option<Subscription<&'c Conn<L>>>,
    deliveries: mpsc::Sender<Result<Box<dyn Delivery>, BrokerError>>,
}

/// The current unit of work of a read connection.
#[derive(Default)]
pub(super) struct UnitOfWork {
    id: u64,
    got: usize,
    settled: usize,
    back_out: bool,
}

pub(super) fn read_thread<L: MqLibrary>(
    lib: L,
    config: &IbmMqConfig,
    commands: &std_mpsc::Receiver<ReadCommand>,
    me: std_mpsc::Sender<ReadCommand>,
    alive: &AtomicBool,
) {
    let conn = match connect(lib, config) {
        Ok(c) => c,
        Err(e) => {
            alive.store(false, Ordering::Release);
            refuse_opens(commands, &e);
            return;
        }
    };
    let properties = match Properties::new(&conn, MQCMHO::default()) {
        Ok(p) => p,
        Err(e) => {
            alive.store(false, Ordering::Release);
            refuse_opens(commands, &mq_err("MQCRTMH failed", e));
            return;
        }
    };
    let mut reader = Reader {
        properties,
        conn: &conn,
        inputs: Vec::new(),
        uow: UnitOfWork::default(),
        buffer: vec![0; FIRST_BUFFER],
        turn: 0,
        empty: 0,
        closing: None,
        me,
    };
    let ended = reader.run(commands);
    alive.store(false, Ordering::Release);
    if let Err(e) = &ended {
        tracing::warn!("IBM MQ read connection to {}: {e}", describe(config));
        for input in &reader.inputs {
            let _ = input.deliveries.try_send(Err(e.clone()));
        }
        refuse_opens(commands, e);
    }
    if reader.uow.got > 0 {
        // Unsettled messages go back to their queues, to be delivered again.
        let _ = Syncpoint::new(&conn).backout();
    }
    drop(reader);
    let _ = conn.disconnect();
}

/// Answers the `Open`s still queued to a thread that cannot serve them.
pub(super) fn refuse_opens(commands: &std_mpsc::Receiver<ReadCommand>, e: &BrokerError) {
    while let Ok(c) = commands.try_recv() {
        if let ReadCommand::Open { opened, .. } = c {
            let _ = opened.send(Err(e.clone()));
        }
    }
}

pub(super) struct Reader<'c, L: MqLibrary> {
    conn: &'c Conn<L>,
    inputs: Vec<Input<'c, L>>,
    uow: UnitOfWork,
    buffer: Vec<u8>,
    turn: usize,
    /// Queues found empty since the last message.
    empty: usize,
    closing: Option<Instant>,
    me: std_mpsc::Sender<ReadCommand>,
    /// The message handle each MQGET fills with the message's properties.
    properties: Properties<&'c Conn<L>>,
}

impl<'c, L: MqLibrary> Reader<'c, L> {
    fn run(&mut self, commands: &std_mpsc::Receiver<ReadCommand>) -> Result<(), BrokerError> {
        loop {
            let hold = self.inputs.is_empty()
                || self.uow.got >= MAX_UNCOMMITTED
                || self.uow.back_out
                || self.closing.is_some();
            let first = if hold {
                commands.recv_timeout(Duration::from_millis(100)).ok()
            } else {
                commands.try_recv().ok()
            };
            if let Some(c) = first {
                self.command(c);
                while let Ok(c) = commands.try_recv() {
                    self.command(c);
                }
            }
            self.finish_unit_of_work()?;
            if let Some(since) = self.closing {
                if self.uow.got == 0 || since.elapsed() > CLOSE_WAIT {
                    return Ok(());
                }
                continue;
            }
            // A receiver that went away (the runtime stopped or reconnected) closes
            // its queue.
            self.inputs.retain(|i| !i.deliveries.is_closed());
            if !hold {
                self.get_one()?;
            }
        }
    }

    fn command(&mut self, c: ReadCommand) {
        match c {
            ReadCommand::Open {
                from,
                deliveries,
                opened,
            } => match self.open(&from) {
                Ok((object, subscription)) => {
                    self.inputs.push(Input {
                        name: from.to_string(),
                        object,
                        _subscription: subscription,
                        deliveries,
                    });
                    let _ = opened.send(Ok(()));
                }
                Err(e) => {
                    let _ = opened.send(Err(e));
                }
            },
            ReadCommand::Settled { uow, how } => {
                // A settlement from a unit of work already backed out changes nothing.
                if uow == self.uow.id {
                    self.uow.settled += 1;
                    if how != Settle::Ack {
                        // MQ has no per-message reject: the message goes back, and the
                        // queue's backout threshold (BOTHRESH/BOQNAME) applies.
                        self.uow.back_out = true;
                    }
                }
            }
            ReadCommand::Close => self.closing = Some(Instant::now()),
        }
    }

    /// Opens a queue for input, or subscribes to a topic (a managed, non-durable
    /// subscription: publications while decoy is not running are not kept for it).
    #[allow(clippy::type_complexity)]
    fn open(
        &self,
        from: &Destination,
    ) -> Result<(Object<&'c Conn<L>>, Option<Subscription<&'c Conn<L>>>), BrokerError> {
        if from.topic {
            let (sub, object) = Subscription::subscribe_managed(
                self.conn,
                (
                    constants::MQSO_CREATE
                        | constants::MQSO_NON_DURABLE
                        | constants::MQSO_FAIL_IF_QUIESCING,
                    ObjectString(from.name.as_str()),
                ),
            )
            .map_err(|e| mq_err(format!("cannot subscribe to {from}"), e))?
            .discard_warning();
            return Ok((object, Some(sub)));
        }
        let name = QueueName::from_str(&from.name)
            .map_err(|e| mq_err(format!("queue name {:?}", from.name), e))?;
        let object = Object::open(
            self.conn,
            &(
                name,
                constants::MQOO_INPUT_AS_Q_DEF | constants::MQOO_FAIL_IF_QUIESCING,
            ),
        )
        .map_err(|e| {
            let what = format!("cannot open {:?} for input", from.name);
            if unknown_destination(e.2) {
                BrokerError::missing_queue(&from.name, format!("{what}: {e}"))
            } else {
                mq_err(what, e)
            }
        })?
        .discard_warning();
        Ok((object, None))
    }

    /// Commits (or backs out) once every message of the unit of work is settled.
    fn finish_unit_of_work(&mut self) -> Result<(), BrokerError> {
        if self.uow.got == 0 || self.uow.settled < self.uow.got {
            return Ok(());
        }
        let sync = Syncpoint::new(self.conn);
        let result = if self.uow.back_out {
            // What made a reply fail (a full or put-inhibited queue) usually lasts a
            // while: pause before the requests come back, rather than spin.
            std::thread::sleep(BACKOUT_PAUSE);
            sync.backout().map_err(|e| mq_err("MQBACK failed", e))
        } else {
            sync.commit().map_err(|e| mq_err("MQCMIT failed", e))
        };
        self.uow = UnitOfWork {
            id: self.uow.id + 1,
            ..UnitOfWork::default()
        };
        result.map(|_| ())
    }

    /// One MQGET on the next queue in turn; a message goes to its receiver.
    fn get_one(&mut self) -> Result<(), BrokerError> {
        let n = self.inputs.len();
        if n == 0 {
            return Ok(());
        }
        let i = self.turn % n;
        // Milliseconds to wait; `None`: do not wait.
        let wait = if n == 1 {
            Some(if self.uow.got > 0 {
                WAIT_MANY
            } else {
                WAIT_ONE
            })
        } else if self.empty >= n {
            Some(WAIT_MANY)
        } else {
            None
        };
        let got = loop {
            let options = (
                wait.map_or(GetWait::NoWait, GetWait::Wait),
                constants::MQGMO_SYNCPOINT
                    | constants::MQGMO_FAIL_IF_QUIESCING
                    | constants::MQGMO_PROPERTIES_IN_HANDLE,
                GetConvert::ConvertTo(CCSID(1208), constants::MQENC_NATIVE),
                &mut self.properties,
            );
            let input = &self.inputs[i];
            let result = input
                .object
                .get_data_with::<structs::MQMD, u8>(&options, &mut self.buffer);
            match result {
                Ok(c)
                    if c.warning()
                        .is_some_and(|(rc, _)| rc == constants::MQRC_TRUNCATED_MSG_FAILED) =>
                {
                    // The message stays on the queue; get it again with room for it.
                    if self.buffer.len() >= MAX_MESSAGE {
                        return Err(BrokerError::new(format!(
                            "a message on {} is larger than {MAX_MESSAGE} bytes",
                            input.name
                        )));
                    }
                    let grown = (self.buffer.len() * 4).min(MAX_MESSAGE);
                    self.buffer.resize(grown, 0);
                }
                Ok(c) => {
                    break c
                        .discard_warning()
                        .map(|(data, md)| (Bytes::copy_from_slice(data), md));
                }
                Err(e) if e.2 == constants::MQRC_NO_MSG_AVAILABLE => break None,
                Err(e) => return Err(mq_err(format!("MQGET on {} failed", input.name), e)),
            }
        };
        self.turn = self.turn.wrapping_add(1);
        let Some((body, md)) = got else {
            self.empty += 1;
            return Ok(());
        };
        self.empty = 0;
        self.uow.got += 1;
        let input = &self.inputs[i];
        let mut message = message_from(body, &md);
        message.properties = user_properties(&self.properties);
        let delivery = MqDelivery {
            message,
            queue: input.name.clone(),
            uow: self.uow.id,
            settle: self.me.clone(),
            settled: false,
        };
        if input
            .deliveries
            .blocking_send(Ok(Box::new(delivery)))
            .is_err()
        {
            // Its receiver went away meanwhile: the message goes back.
            self.uow.settled += 1;
            self.uow.back_out = true;
        }
        Ok(())
    }
}

/// The message's user properties (`usr.*`, where JMS application properties are),
/// as text, named without the `usr.` folder: what mapping property matchers see.
pub(super) fn user_properties<C: mqi::connection::AsConnection>(
    p: &Properties<C>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let options = constants::MQIMPO_CONVERT_VALUE | constants::MQIMPO_CONVERT_TYPE;
    for item in p.property_iter::<(Value, Name<String>), _>(INQUIRE_ALL_USR, options) {
        let Ok(c) = item else { break };
        let (value, Name(name)) = c.discard_warning();
        let name = name.strip_prefix("usr.").unwrap_or(&name).to_owned();
        let value = match value {
            Value::Boolean(b) => b.to_string(),
            Value::Int8(n) => n.to_string(),
            Value::Int16(n) => n.to_string(),
            Value::Int32(n) => n.to_string(),
            Value::Int64(n) => n.to_string(),
            Value::Float32(n) => n.to_string(),
            Value::Float64(n) => n.to_string(),
            Value::ByteString(b) => b.iter().map(|x| format!("{x:02X}")).collect(),
            Value::String(s) => {
                // Values come in the client's CCSID: UTF-8 as is, another (ISO 8859-1
                // and its ASCII subsets, as a C locale gives) byte for byte.
                let bytes: Vec<u8> = s.data().iter().map(|&c| c as u8).collect();
                if s.ccsid() == 1208 {
                    String::from_utf8_lossy(&bytes).into_owned()
                } else {
                    bytes.iter().map(|&b| char::from(b)).collect()
                }
            }
            Value::Null => String::new(),
        };
        out.push((name, value));
    }
    out
}

pub(super) fn text(chars: &[libmqm_sys::MQCHAR]) -> Option<String> {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    let s = String::from_utf8_lossy(&bytes);
    let s = s.trim_end_matches([' ', '\0']);
    (!s.is_empty()).then(|| s.to_owned())
}

/// The transport-neutral message for a received MQ message.
pub(super) fn message_from(body: Bytes, md: &libmqm_sys::MQMD) -> Message {
    Message {
        body,
        properties: Vec::new(),
        message_id: Some(md.MsgId.to_vec()),
        correlation_id: (md.CorrelId != [0; 24]).then(|| md.CorrelId.to_vec()),
        reply_to: text(&md.ReplyToQ),
        reply_to_manager: text(&md.ReplyToQMgr),
        format: text(&md.Format),
        message_type: Some(
            match md.MsgType {
                1 => "request",
                2 => "reply",
                4 => "report",
                8 => "datagram",
                _ => "other",
            }
            .to_owned(),
        ),
        persistent: md.Persistence == libmqm_sys::MQPER_PERSISTENT,
        ..Message::default()
    }
}
