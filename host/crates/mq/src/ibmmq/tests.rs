//! The IBM MQ adapter against `mqi`'s mock of the MQI (`libmqm_sys::mock::MockMq`).
//!
//! The mock's functions are backed by a small fake queue manager: queues of
//! (descriptor, body), units of work per connection handle, and a log of every call
//! with the options it was given. The tests run the real runtime over the adapter
//! and check what reached the "queue manager": the MQCONNX client parameters, that
//! gets were under syncpoint, the reply's descriptor field by field, and that a
//! request is committed only after its reply was put.
#![allow(clippy::unwrap_used)]
// The MQI passes descriptors and buffers as raw pointers; the fake reads and writes
// them as IBM's client library would.
#![allow(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libmqm_sys::{self as mq, mock::MockMq};
use serde_json::json;

use super::*;
use crate::config;
use crate::runtime::MqRuntime;
use decoy_core::metrics::TransportMetrics;

const CC_OK: i32 = 0;
const CC_WARNING: i32 = 1;
const CC_FAILED: i32 = 2;
const RC_NONE: i32 = 0;
const RC_CONNECTION_BROKEN: i32 = 2009;
const RC_NO_MSG_AVAILABLE: i32 = 2033;
const RC_PUT_INHIBITED: i32 = 2051;
const RC_TRUNCATED_MSG_FAILED: i32 = 2080;
const RC_UNKNOWN_OBJECT_NAME: i32 = 2085;
const RC_HOST_NOT_AVAILABLE: i32 = 2538;
const GMO_SYNCPOINT: i32 = 0x2;
const GMO_CONVERT: i32 = 0x4000;
const PMO_SYNCPOINT: i32 = 0x2;
const PMO_NO_SYNCPOINT: i32 = 0x4;

fn chars(s: &str, n: usize) -> Vec<mq::MQCHAR> {
    let mut v: Vec<mq::MQCHAR> = s.bytes().map(|b| b as mq::MQCHAR).collect();
    v.resize(n, b' ' as mq::MQCHAR);
    v
}

fn string(c: &[mq::MQCHAR]) -> String {
    let b: Vec<u8> = c.iter().map(|&c| c as u8).collect();
    String::from_utf8_lossy(&b)
        .trim_end_matches([' ', '\0'])
        .to_owned()
}

/// # Safety
/// `ptr` is null or points at `len` readable bytes.
unsafe fn ptr_text(ptr: mq::MQPTR, len: mq::MQLONG) -> Option<String> {
    if ptr.is_null() || len <= 0 {
        return None;
    }
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len as usize) };
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// What MQCONNX was given.
#[derive(Debug, Clone, Default)]
struct Connect {
    queue_manager: String,
    client: bool,
    channel: String,
    connection_name: String,
    user: Option<String>,
    password: Option<String>,
    cipher: String,
    peer_name: Option<String>,
}

/// A put the fake saw.
#[derive(Debug, Clone)]
struct Put {
    queue: String,
    md: mq::MQMD,
    body: Vec<u8>,
    options: i32,
    properties: Vec<(String, String)>,
}

#[derive(Default)]
struct Fake {
    queues: HashMap<String, VecDeque<(mq::MQMD, Vec<u8>)>>,
    next_handle: i32,
    objects: HashMap<i32, String>,
    /// Messages got under syncpoint, per connection handle, not yet committed.
    uncommitted: HashMap<i32, Vec<(String, mq::MQMD, Vec<u8>)>>,
    connects: Vec<Connect>,
    /// Every call in order: "CONNX", "GET q", "PUT q", "CMIT n", "BACK n", "DISC".
    log: Vec<String>,
    puts: Vec<Put>,
    get_options: Vec<i32>,
    /// While set, MQCONNX fails (host not available).
    down: bool,
    /// The next MQGET fails with MQRC_CONNECTION_BROKEN (once).
    break_next_get: bool,
    /// Puts to these queues fail with MQRC_PUT_INHIBITED, this many times.
    inhibit: HashMap<String, usize>,
    /// Message properties, by message id.
    properties: HashMap<[u8; 24], Vec<(String, String)>>,
    /// Per message handle: its properties and the next one MQINQMP returns.
    handles: HashMap<i64, (Vec<(String, String)>, usize)>,
}

impl Fake {
    fn queue(&mut self, name: &str) -> &mut VecDeque<(mq::MQMD, Vec<u8>)> {
        self.queues.entry(name.to_owned()).or_default()
    }

    /// A connection ends: what it had not committed goes back, as the queue manager
    /// backs out a broken connection's unit of work.
    fn back_out(&mut self, hconn: i32) -> usize {
        let list = self.uncommitted.remove(&hconn).unwrap_or_default();
        let n = list.len();
        for (q, mut md, body) in list.into_iter().rev() {
            md.BackoutCount += 1;
            self.queue(&q).push_front((md, body));
        }
        n
    }
}

type Shared = Arc<Mutex<Fake>>;

fn lock(f: &Shared) -> std::sync::MutexGuard<'_, Fake> {
    f.lock().unwrap_or_else(|p| p.into_inner())
}

/// A request as a requesting application would put it: MQMT_REQUEST with a reply-to
/// queue, in a code page and format of its own (which the reply must not inherit).
fn request(msg_id: u8, body: &str, reply_to: &str) -> (mq::MQMD, Vec<u8>) {
    let mut md: mq::MQMD = *mqi::types::FORMAT_NONE.into_mqmd();
    md.MsgType = 1;
    md.MsgId = [msg_id; 24];
    md.CorrelId = [0; 24];
    md.CodedCharSetId = 819;
    md.Format.copy_from_slice(&chars("MQSTR", 8));
    md.ReplyToQ.copy_from_slice(&chars(reply_to, 48));
    md.ReplyToQMgr.copy_from_slice(&chars("QM1", 48));
    (md, body.as_bytes().to_vec())
}

/// The mock MQI, each function backed by `fake`.
fn mock_mqi(fake: &Shared) -> Arc<MockMq> {
    let mut m = MockMq::new();
    let f = fake.clone();
    m.expect_MQCONNX().returning(move |qm, cno, hconn, cc, rc| {
        let mut f = lock(&f);
        let mut c = Connect {
            queue_manager: string(qm),
            client: cno.Options & 0x800 != 0, // MQCNO_CLIENT_BINDING
            ..Connect::default()
        };
        // SAFETY: as IBM's client reads them: each structure is found by its
        // pointer, or else by its offset from the MQCNO, and lives across the call.
        unsafe {
            let base = std::ptr::from_ref(&*cno).cast::<u8>();
            let cd = if cno.ClientConnOffset != 0 {
                base.offset(cno.ClientConnOffset as isize)
                    .cast::<mq::MQCD>()
            } else {
                cno.ClientConnPtr.cast::<mq::MQCD>().cast_const()
            };
            if let Some(cd) = cd.as_ref() {
                c.channel = string(&cd.ChannelName);
                c.connection_name = string(&cd.ConnectionName);
                c.cipher = string(&cd.SSLCipherSpec);
                c.peer_name = ptr_text(cd.SSLPeerNamePtr, cd.SSLPeerNameLength);
            }
            let csp = if cno.SecurityParmsOffset != 0 {
                base.offset(cno.SecurityParmsOffset as isize)
                    .cast::<mq::MQCSP>()
            } else {
                cno.SecurityParmsPtr.cast_const()
            };
            if let Some(csp) = csp.as_ref() {
                c.user = ptr_text(csp.CSPUserIdPtr, csp.CSPUserIdLength);
                c.password = ptr_text(csp.CSPPasswordPtr, csp.CSPPasswordLength);
            }
        }
        f.connects.push(c);
        f.log.push("CONNX".into());
        if f.down {
            *cc = CC_FAILED;
            *rc = RC_HOST_NOT_AVAILABLE;
            return;
        }
        f.next_handle += 1;
        *hconn = 1000 + f.next_handle;
        *cc = CC_OK;
        *rc = RC_NONE;
    });
    let f = fake.clone();
    m.expect_MQDISC().returning(move |hconn, cc, rc| {
        let mut f = lock(&f);
        let h = *hconn;
        f.back_out(h);
        f.log.push("DISC".into());
        *cc = CC_OK;
        *rc = RC_NONE;
    });
    let f = fake.clone();
    m.expect_MQOPEN()
        .returning(move |_, od, _options, hobj, cc, rc| {
            let mut f = lock(&f);
            let name = if od.ObjectType == 8 {
                // MQOT_TOPIC: a publication target, by topic string.
                // SAFETY: mqi points the topic string at bytes that outlive the call.
                let topic = unsafe { ptr_text(od.ObjectString.VSPtr, od.ObjectString.VSLength) };
                format!("TOPIC:{}", topic.unwrap_or_default())
            } else {
                string(&od.ObjectName)
            };
            if !name.starts_with("TOPIC:") && !f.queues.contains_key(&name) {
                *cc = CC_FAILED;
                *rc = RC_UNKNOWN_OBJECT_NAME;
                return;
            }
            f.next_handle += 1;
            let h = f.next_handle;
            f.objects.insert(h, name);
            *hobj = h;
            *cc = CC_OK;
            *rc = RC_NONE;
        });
    m.expect_MQCLOSE().returning(|_, hobj, _, cc, rc| {
        *hobj = mq::MQHO_UNUSABLE_HOBJ;
        *cc = CC_OK;
        *rc = RC_NONE;
    });
    let f = fake.clone();
    m.expect_MQGET().returning(
        move |hconn, hobj, md, gmo, buffer_len, buffer, data_len, cc, rc| {
            let mut f = lock(&f);
            f.get_options.push(gmo.Options);
            if std::mem::take(&mut f.break_next_get) {
                *cc = CC_FAILED;
                *rc = RC_CONNECTION_BROKEN;
                return;
            }
            let q = f.objects[&hobj].clone();
            let Some((m, body)) = f.queue(&q).pop_front() else {
                drop(f);
                // A waiting get: pause a little, as the queue manager would.
                if gmo.Options & 0x1 != 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                *cc = CC_FAILED;
                *rc = RC_NO_MSG_AVAILABLE;
                return;
            };
            *data_len = body.len() as i32;
            if body.len() > buffer_len as usize {
                f.queue(&q).push_front((m, body));
                *cc = CC_WARNING;
                *rc = RC_TRUNCATED_MSG_FAILED;
                return;
            }
            // SAFETY: mqi passes a full MQMD and a buffer of `buffer_len` bytes.
            unsafe {
                *md.cast::<mq::MQMD>() = m;
                std::ptr::copy_nonoverlapping(body.as_ptr(), buffer.cast::<u8>(), body.len());
            }
            f.log.push(format!("GET {q}"));
            if gmo.MsgHandle != 0 {
                let props = f.properties.get(&m.MsgId).cloned().unwrap_or_default();
                f.handles.insert(gmo.MsgHandle, (props, 0));
            }
            if gmo.Options & GMO_SYNCPOINT != 0 {
                f.uncommitted.entry(hconn).or_default().push((q, m, body));
            }
            *cc = CC_OK;
            *rc = RC_NONE;
        },
    );
    let f = fake.clone();
    m.expect_MQPUT()
        .returning(move |_, hobj, md, pmo, len, buffer, cc, rc| {
            let mut f = lock(&f);
            let q = f.objects[&hobj].clone();
            if let Some(n) = f.inhibit.get_mut(&q).filter(|n| **n > 0) {
                *n -= 1;
                *cc = CC_FAILED;
                *rc = RC_PUT_INHIBITED;
                return;
            }
            // SAFETY: mqi passes a full MQMD and `len` bytes of data.
            let (md, body) = unsafe {
                (
                    *md.cast::<mq::MQMD>(),
                    std::slice::from_raw_parts(buffer.cast::<u8>(), len as usize).to_vec(),
                )
            };
            f.log.push(format!("PUT {q}"));
            let properties = f
                .handles
                .get(&pmo.OriginalMsgHandle)
                .map(|h| h.0.clone())
                .unwrap_or_default();
            f.puts.push(Put {
                queue: q.clone(),
                md,
                body: body.clone(),
                options: pmo.Options,
                properties,
            });
            match q.strip_prefix("TOPIC:") {
                // A publication reaches the topic's subscription, if there is one.
                Some(t) => {
                    let managed = format!("MANAGED.{t}");
                    if f.queues.contains_key(&managed) {
                        f.queue(&managed).push_back((md, body));
                    }
                }
                None => f.queue(&q).push_back((md, body)),
            }
            *cc = CC_OK;
            *rc = RC_NONE;
        });
    let f = fake.clone();
    m.expect_MQSUB()
        .returning(move |_, sd, hobj, hsub, cc, rc| {
            let mut f = lock(&f);
            // SAFETY: mqi points the topic string at bytes that outlive the call.
            let topic = unsafe { ptr_text(sd.ObjectString.VSPtr, sd.ObjectString.VSLength) }
                .unwrap_or_default();
            // A managed subscription: the queue manager makes a queue for it.
            let managed = format!("MANAGED.{topic}");
            f.queue(&managed);
            f.next_handle += 1;
            let h = f.next_handle;
            f.objects.insert(h, managed);
            if let Some(hobj) = hobj {
                *hobj = h;
            }
            f.next_handle += 1;
            *hsub = f.next_handle;
            f.log.push(format!("SUB {topic} options {:#x}", sd.Options));
            *cc = CC_OK;
            *rc = RC_NONE;
        });
    let f = fake.clone();
    m.expect_MQCRTMH().returning(move |_, _, hmsg, cc, rc| {
        let mut f = lock(&f);
        f.next_handle += 1;
        *hmsg = i64::from(f.next_handle);
        f.handles.insert(*hmsg, (Vec::new(), 0));
        *cc = CC_OK;
        *rc = RC_NONE;
    });
    let f = fake.clone();
    m.expect_MQDLTMH().returning(move |_, hmsg, _, cc, rc| {
        lock(&f).handles.remove(hmsg);
        *hmsg = 0;
        *cc = CC_OK;
        *rc = RC_NONE;
    });
    let f = fake.clone();
    m.expect_MQSETMP()
        .returning(move |_, hmsg, _, name, _, typ, len, value, cc, rc| {
            // SAFETY: mqi points the name and the value at bytes that outlive the call.
            let (name, value) = unsafe {
                (
                    ptr_text(name.VSPtr, name.VSLength).unwrap_or_default(),
                    ptr_text(value, len).unwrap_or_default(),
                )
            };
            assert_eq!(typ, 1024, "MQTYPE_STRING");
            lock(&f)
                .handles
                .get_mut(&hmsg)
                .unwrap()
                .0
                .push((name, value));
            *cc = CC_OK;
            *rc = RC_NONE;
        });
    let f = fake.clone();
    m.expect_MQINQMP().returning(
        move |_, hmsg, impo, _name, _, typ, value_len, value, data_len, cc, rc| {
            let mut f = lock(&f);
            let (props, next) = f.handles.get_mut(&hmsg).unwrap();
            let Some((name, v)) = props.get(*next).cloned() else {
                *cc = CC_FAILED;
                *rc = 2471; // MQRC_PROPERTY_NOT_AVAILABLE
                return;
            };
            let full = format!("usr.{name}");
            *data_len = v.len() as i32;
            if v.len() > value_len as usize || full.len() > impo.ReturnedName.VSBufSize as usize {
                *cc = CC_FAILED;
                *rc = if v.len() > value_len as usize {
                    2469
                } else {
                    2465
                };
                return;
            }
            *next += 1;
            // SAFETY: mqi passes buffers of the sizes it gives.
            unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr(), value.cast::<u8>(), v.len());
                std::ptr::copy_nonoverlapping(
                    full.as_ptr(),
                    impo.ReturnedName.VSPtr.cast::<u8>(),
                    full.len(),
                );
            }
            impo.ReturnedName.VSLength = full.len() as i32;
            impo.ReturnedName.VSCCSID = 1208;
            impo.ReturnedCCSID = 1208;
            *typ = 1024;
            *cc = CC_OK;
            *rc = RC_NONE;
        },
    );
    let f = fake.clone();
    m.expect_MQCMIT().returning(move |hconn, cc, rc| {
        let mut f = lock(&f);
        let n = f.uncommitted.remove(&hconn).map_or(0, |l| l.len());
        f.log.push(format!("CMIT {n}"));
        *cc = CC_OK;
        *rc = RC_NONE;
    });
    let f = fake.clone();
    m.expect_MQBACK().returning(move |hconn, cc, rc| {
        let mut f = lock(&f);
        let n = f.back_out(hconn);
        f.log.push(format!("BACK {n}"));
        *cc = CC_OK;
        *rc = RC_NONE;
    });
    Arc::new(m)
}

fn connection() -> serde_json::Value {
    json!({"connectionId": "qm1", "connectionData": {
        "type": "ibm-mq", "hostname": "127.0.0.1", "port": 1414, "queueManager": "QM1",
        "channel": "DEV.APP.SVRCONN", "username": "app", "password": "passw0rd",
        "useMQCSPAuthenticationMode": true, "sslCipherSuite": "TLS_AES_128_GCM_SHA256",
        "sslPeerName": "CN=qm1,O=decoy", "readConnectionsToOpen": 2, "writeConnectionsToOpen": 2,
        "unmatched": {"queue": "DEV.DEAD.LETTER.QUEUE"}}})
}

/// The runtime serving `mappings` over the adapter and the fake queue manager.
fn serve(fake: &Shared, mappings: &[serde_json::Value]) -> MqRuntime {
    let load = config::load_for_test(&connection(), mappings);
    let config::ConnectionKind::IbmMq(c) = load.connections[0].kind.clone() else {
        panic!("not an IBM MQ connection")
    };
    let broker = IbmMqBroker::new(mock_mqi(fake), c);
    let metrics = Arc::new(TransportMetrics::default());
    MqRuntime::start(
        &load.connections,
        vec![Arc::new(broker) as Arc<dyn Broker>],
        load.mappings
            .into_iter()
            .map(|m| (Arc::new(m), Arc::default()))
            .collect(),
        move |_| (metrics.clone(), Arc::default()),
        None,
        Arc::default(),
        crate::threads::MqThreads::current(),
    )
}

fn fake_with_queues(names: &[&str]) -> Shared {
    let fake = Shared::default();
    for n in names {
        lock(&fake).queue(n);
    }
    fake
}

/// Waits (up to 10 s, polling) until `done` holds of the fake.
async fn until(fake: &Shared, what: &str, done: impl Fn(&Fake) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(&lock(fake)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; calls: {:?}",
            lock(fake).log
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn mapping() -> serde_json::Value {
    json!({"mappingId": "orders", "connectionId": "qm1",
           "request": {"destination": {"name": "DEV.QUEUE.1", "type": "QUEUE"}, "bodyMatcher": {"contains": "<order"}},
           "response": {"text": "<ok/>", "format": "MQFMT_STRING"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_gets_its_reply_on_its_reply_to_queue_and_is_committed_after_the_put() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "DEV.QUEUE.2", "DEV.DEAD.LETTER.QUEUE"]);
    let (mut md, body) = request(7, "<order id='1'/>", "DEV.QUEUE.2");
    md.Persistence = 1; // MQPER_PERSISTENT
    lock(&fake).queue("DEV.QUEUE.1").push_back((md, body));
    let rt = serve(&fake, &[mapping()]);
    until(&fake, "the commit", |f| f.log.iter().any(|l| l == "CMIT 1")).await;
    rt.shutdown().await;

    let f = lock(&fake);
    // MQCONNX as a client, with everything the connection file names.
    let c = &f.connects[0];
    assert_eq!(c.queue_manager, "QM1");
    assert!(c.client, "MQCNO_CLIENT_BINDING");
    assert_eq!(c.channel, "DEV.APP.SVRCONN");
    assert_eq!(c.connection_name, "127.0.0.1(1414)");
    assert_eq!(c.user.as_deref(), Some("app"));
    assert_eq!(c.password.as_deref(), Some("passw0rd"));
    assert_eq!(c.cipher, "TLS_AES_128_GCM_SHA256");
    assert_eq!(c.peer_name.as_deref(), Some("CN=qm1,O=decoy"));
    // Gets are under syncpoint and ask for conversion to UTF-8.
    assert!(
        f.get_options
            .iter()
            .all(|o| o & GMO_SYNCPOINT != 0 && o & GMO_CONVERT != 0),
        "{:?}",
        f.get_options
    );
    // The reply: on the request's reply-to queue, outside syncpoint, its descriptor
    // set field by field rather than inherited from the request.
    assert_eq!(f.puts.len(), 1);
    let p = &f.puts[0];
    assert_eq!(p.queue, "DEV.QUEUE.2");
    assert_eq!(p.body, b"<ok/>");
    assert_eq!(p.md.MsgType, 2, "MQMT_REPLY");
    assert_eq!(p.md.CorrelId, [7; 24], "CorrelId is the request's MsgId");
    assert_ne!(p.md.MsgId, [7; 24]);
    assert_eq!(string(&p.md.Format), "MQSTR");
    assert_eq!(p.md.CodedCharSetId, 1208, "not the request's 819");
    assert_eq!(p.md.Persistence, 1, "persistent, as its request");
    assert!(p.options & PMO_NO_SYNCPOINT != 0 && p.options & PMO_SYNCPOINT == 0);
    // At-least-once: the get is committed only after the reply was put.
    let put_at = f.log.iter().position(|l| l == "PUT DEV.QUEUE.2").unwrap();
    let commit_at = f.log.iter().position(|l| l == "CMIT 1").unwrap();
    assert!(put_at < commit_at, "{:?}", f.log);
    assert!(f.queues["DEV.QUEUE.1"].is_empty());
    assert!(f.uncommitted.values().all(Vec::is_empty));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_cannot_be_put_backs_the_request_out_and_it_is_answered_when_it_comes_again() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "DEV.QUEUE.2", "DEV.DEAD.LETTER.QUEUE"]);
    let (md, body) = request(1, "<order/>", "DEV.QUEUE.2");
    {
        let mut f = lock(&fake);
        f.queue("DEV.QUEUE.1").push_back((md, body));
        f.inhibit.insert("DEV.QUEUE.2".into(), 1);
    }
    let rt = serve(&fake, &[mapping()]);
    until(&fake, "the reply after a backout", |f| {
        f.log.iter().any(|l| l == "BACK 1") && f.log.iter().any(|l| l == "CMIT 1")
    })
    .await;
    rt.shutdown().await;
    let f = lock(&fake);
    assert_eq!(f.puts.len(), 1, "answered once: {:?}", f.log);
    assert_eq!(f.queues["DEV.QUEUE.2"].len(), 1);
    assert!(f.queues["DEV.QUEUE.1"].is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_connection_is_opened_again_and_no_request_is_lost() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "DEV.QUEUE.2", "DEV.DEAD.LETTER.QUEUE"]);
    lock(&fake).down = true;
    let rt = serve(&fake, &[mapping()]);
    // The queue manager is down at start: connects are retried.
    until(&fake, "a second connect attempt", |f| f.connects.len() >= 2).await;
    {
        let mut f = lock(&fake);
        f.down = false;
        f.break_next_get = true;
        for i in 1..=20 {
            let (md, body) = request(i, "<order/>", "DEV.QUEUE.2");
            f.queue("DEV.QUEUE.1").push_back((md, body));
        }
    }
    until(&fake, "20 replies", |f| {
        f.queues["DEV.QUEUE.1"].is_empty()
            && f.uncommitted.values().all(Vec::is_empty)
            && f.puts.len() >= 20
    })
    .await;
    rt.shutdown().await;
    let f = lock(&fake);
    let mut answered: Vec<u8> = f.puts.iter().map(|p| p.md.CorrelId[0]).collect();
    answered.sort_unstable();
    answered.dedup();
    assert_eq!(answered, (1..=20).collect::<Vec<u8>>(), "{:?}", f.log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmatched_request_moves_to_the_unmatched_queue_keeping_its_ids_and_reply_to() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "DEV.QUEUE.2", "DEV.DEAD.LETTER.QUEUE"]);
    let (md, body) = request(9, "not an order", "DEV.QUEUE.2");
    lock(&fake).queue("DEV.QUEUE.1").push_back((md, body));
    let rt = serve(&fake, &[mapping()]);
    until(&fake, "the move", |f| f.log.iter().any(|l| l == "CMIT 1")).await;
    rt.shutdown().await;
    let f = lock(&fake);
    assert_eq!(f.puts.len(), 1);
    let p = &f.puts[0];
    assert_eq!(p.queue, "DEV.DEAD.LETTER.QUEUE");
    assert_eq!(p.body, b"not an order");
    assert_eq!(p.md.MsgType, 1, "still a request");
    assert_eq!(p.md.MsgId, [9; 24]);
    assert_eq!(string(&p.md.ReplyToQ), "DEV.QUEUE.2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_replies_are_all_sent_and_a_large_message_is_read_whole() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "DEV.QUEUE.2", "DEV.DEAD.LETTER.QUEUE"]);
    let big = format!("<order>{}</order>", "x".repeat(200_000));
    {
        let mut f = lock(&fake);
        for i in 1..=50 {
            let body = if i == 50 { big.as_str() } else { "<order/>" };
            let (md, body) = request(i, body, "DEV.QUEUE.2");
            f.queue("DEV.QUEUE.1").push_back((md, body));
        }
    }
    let mut m = mapping();
    m["response"]["fixedDelayMilliseconds"] = json!(100);
    m["receiveThreads"] = json!(2);
    let rt = serve(&fake, &[m]);
    until(&fake, "50 replies committed", |f| {
        f.puts.len() == 50 && f.uncommitted.values().all(Vec::is_empty)
    })
    .await;
    rt.shutdown().await;
    let f = lock(&fake);
    assert!(f.queues["DEV.QUEUE.1"].is_empty());
    let mut answered: Vec<u8> = f.puts.iter().map(|p| p.md.CorrelId[0]).collect();
    answered.sort_unstable();
    assert_eq!(answered, (1..=50).collect::<Vec<u8>>());
    // Two receivers over two read connections: both connected.
    assert!(f.connects.len() >= 3, "{:?}", f.connects.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_queue_is_a_clear_error_naming_it() {
    let fake = fake_with_queues(&["DEV.QUEUE.2"]);
    let load = config::load_for_test(&connection(), &[]);
    let config::ConnectionKind::IbmMq(c) = load.connections[0].kind.clone() else {
        panic!("not an IBM MQ connection")
    };
    let broker = IbmMqBroker::new(mock_mqi(&fake), c);
    let e = broker
        .receiver(&Destination::queue("NO.SUCH.QUEUE"), 0)
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("\"NO.SUCH.QUEUE\"")
            && e.to_string().contains("UNKNOWN_OBJECT_NAME"),
        "{e}"
    );
    let long = "Q".repeat(49);
    let e = broker
        .receiver(&Destination::queue(long.clone()), 1)
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains(&long), "{e}");
}

#[test]
fn serving_without_the_client_library_says_where_it_looked_and_how_to_install_it() {
    let dirs = vec![
        PathBuf::from("/nowhere/lib64"),
        PathBuf::from("/opt/mqm/lib64"),
    ];
    assert_eq!(find_client(&dirs[..1]), None);
    let m = missing_client_message("qm1", &dirs);
    assert!(m.contains("libmqm_r.so"), "{m}");
    assert!(m.contains("/nowhere/lib64, /opt/mqm/lib64"), "{m}");
    assert!(m.contains("MQ_INSTALLATION_PATH"), "{m}");
    assert!(m.contains("redistributable client"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publication_on_a_topic_is_answered_on_another_topic() {
    let fake = fake_with_queues(&["DEV.DEAD.LETTER.QUEUE"]);
    let m = json!({"mappingId": "prices", "connectionId": "qm1",
        "request": {"destination": {"name": "dev/prices/request", "type": "TOPIC"}},
        "response": {"destination": {"name": "dev/prices/reply", "type": "TOPIC"}, "text": "42"}});
    let rt = serve(&fake, &[m]);
    until(&fake, "the subscription", |f| {
        f.log
            .iter()
            .any(|l| l.starts_with("SUB dev/prices/request"))
    })
    .await;
    {
        let mut f = lock(&fake);
        let sub = f.log.iter().find(|l| l.starts_with("SUB")).unwrap().clone();
        // MQSO_CREATE | MQSO_NON_DURABLE | MQSO_MANAGED (and FAIL_IF_QUIESCING).
        let options = i64::from_str_radix(sub.rsplit("0x").next().unwrap(), 16).unwrap();
        assert_eq!(options & 0x2, 0x2, "MQSO_CREATE: {sub}");
        assert_eq!(options & 0x20, 0x20, "MQSO_MANAGED: {sub}");
        let (md, body) = request(3, "{}", "");
        f.queue("MANAGED.dev/prices/request").push_back((md, body));
    }
    until(&fake, "the reply and the commit", |f| {
        f.puts.len() == 1 && f.log.iter().any(|l| l == "CMIT 1")
    })
    .await;
    rt.shutdown().await;
    let f = lock(&fake);
    assert_eq!(f.puts[0].queue, "TOPIC:dev/prices/reply");
    assert_eq!(f.puts[0].body, b"42");
    assert_eq!(f.puts[0].md.CorrelId, [3; 24]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_properties_are_matched_and_set_on_the_reply() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "DEV.QUEUE.2", "DEV.DEAD.LETTER.QUEUE"]);
    {
        let mut f = lock(&fake);
        for (id, channel) in [(1u8, "web"), (2, "batch")] {
            let (md, body) = request(id, "<order/>", "DEV.QUEUE.2");
            f.properties
                .insert(md.MsgId, vec![("channel".into(), channel.into())]);
            f.queue("DEV.QUEUE.1").push_back((md, body));
        }
    }
    let mut m = mapping();
    m["request"]["properties"] = json!({"channel": {"equalTo": "web"}});
    m["response"]["properties"] = json!({"served-by": "decoy"});
    let rt = serve(&fake, &[m]);
    until(&fake, "a reply and a move", |f| {
        f.puts.len() == 2
            && f.uncommitted.values().all(Vec::is_empty)
            && f.queues["DEV.QUEUE.1"].is_empty()
    })
    .await;
    rt.shutdown().await;
    let f = lock(&fake);
    let reply = f.puts.iter().find(|p| p.queue == "DEV.QUEUE.2").unwrap();
    assert_eq!(reply.md.CorrelId, [1; 24], "the web request is answered");
    assert_eq!(
        reply.properties,
        vec![("served-by".to_owned(), "decoy".to_owned())]
    );
    let moved = f
        .puts
        .iter()
        .find(|p| p.queue == "DEV.DEAD.LETTER.QUEUE")
        .unwrap();
    assert_eq!(moved.md.MsgId, [2; 24], "the batch one is not matched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_to_a_queue_that_does_not_exist_is_dropped_and_the_request_committed() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "DEV.DEAD.LETTER.QUEUE"]);
    let (md, body) = request(5, "<order/>", "NO.SUCH.REPLY.QUEUE");
    lock(&fake).queue("DEV.QUEUE.1").push_back((md, body));
    let rt = serve(&fake, &[mapping()]);
    until(&fake, "the commit", |f| f.log.iter().any(|l| l == "CMIT 1")).await;
    rt.shutdown().await;
    let f = lock(&fake);
    assert!(f.puts.is_empty());
    assert!(!f.log.iter().any(|l| l.starts_with("BACK")), "{:?}", f.log);
    assert!(f.queues["DEV.QUEUE.1"].is_empty());
}

/// The runtime serving what `root` holds (recorded mappings) over the fake.
fn serve_root(fake: &Shared, root: &std::path::Path) -> MqRuntime {
    let load = config::load(root);
    assert!(load.problems.is_empty(), "{:?}", load.problems);
    let config::ConnectionKind::IbmMq(c) = load.connections[0].kind.clone() else {
        panic!("not an IBM MQ connection")
    };
    let broker = IbmMqBroker::new(mock_mqi(fake), c);
    let metrics = Arc::new(TransportMetrics::default());
    MqRuntime::start(
        &load.connections,
        vec![Arc::new(broker) as Arc<dyn Broker>],
        load.mappings
            .into_iter()
            .map(|m| (Arc::new(m), Arc::default()))
            .collect(),
        move |_| (metrics.clone(), Arc::default()),
        None,
        Arc::default(),
        crate::threads::MqThreads::current(),
    )
}

/// A back end on the fake queue manager: takes requests from BACKEND.IN and puts
/// `echo:<body>` on the fixed queue BACKEND.OUT, its CorrelId the request's MsgId (as
/// IBM MQ applications answer); it never answers a request containing `IGNORE`.
fn echo_back_end(fake: &Shared) -> tokio::task::JoinHandle<()> {
    let fake = fake.clone();
    tokio::spawn(async move {
        loop {
            let next = lock(&fake).queue("BACKEND.IN").pop_front();
            match next {
                Some((md, body)) if !String::from_utf8_lossy(&body).contains("IGNORE") => {
                    let mut r: mq::MQMD = *mqi::types::FORMAT_NONE.into_mqmd();
                    r.MsgType = 2;
                    r.MsgId = [0xEE; 24];
                    r.CorrelId = md.MsgId;
                    r.Format.copy_from_slice(&chars("MQSTR", 8));
                    let mut reply = b"echo:".to_vec();
                    reply.extend_from_slice(&body);
                    lock(&fake).queue("BACKEND.OUT").push_back((r, reply));
                }
                Some(_) => {}
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ibm_mq_back_end_is_recorded_through_its_fixed_reply_queue_and_played_back() {
    use crate::record::{Recording, spec};
    let fake = fake_with_queues(&[
        "APP.REQUEST",
        "BACKEND.IN",
        "BACKEND.OUT",
        "APP.REPLY",
        "DEV.DEAD.LETTER.QUEUE",
    ]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mq-connections.json"),
        json!([connection()]).to_string(),
    )
    .unwrap();
    let load = config::load(dir.path());
    let spec = spec::parse(
        &json!({"routes": [{"connectionId": "qm1", "listen": "APP.REQUEST", "forward": "BACKEND.IN",
                            "reply": {"queue": "BACKEND.OUT", "pairBy": "MSGID_TO_CORRELID"}}],
                "timeoutMilliseconds": 1000}),
        &load.connections,
    )
    .unwrap();
    let config::ConnectionKind::IbmMq(c) = load.connections[0].kind.clone() else {
        panic!("not an IBM MQ connection")
    };
    let broker: Arc<dyn Broker> = Arc::new(IbmMqBroker::new(mock_mqi(&fake), c));
    let brokers = HashMap::from([("qm1".to_owned(), broker)]);
    let echo = echo_back_end(&fake);
    let recording = Recording::start(dir.path(), spec, &brokers).unwrap();
    let bodies = ["<order id='1'/>", r#"{"order":2}"#];
    for (i, b) in bodies.iter().enumerate() {
        let r = request(7 + i as u8, b, "APP.REPLY");
        lock(&fake).queue("APP.REQUEST").push_back(r);
    }
    let ignored = request(9, "IGNORE me", "APP.REPLY");
    lock(&fake).queue("APP.REQUEST").push_back(ignored);
    // A reply for no request decoy forwarded: dropped once, not delivered again.
    let mut stray: mq::MQMD = *mqi::types::FORMAT_NONE.into_mqmd();
    stray.MsgType = 2;
    stray.CorrelId = [0x55; 24];
    lock(&fake)
        .queue("BACKEND.OUT")
        .push_back((stray, b"stray reply".to_vec()));
    until(&fake, "both replies", |f| {
        f.queues.get("APP.REPLY").is_some_and(|q| q.len() == 2)
    })
    .await;
    let mut recorded: Vec<(mq::MQMD, Vec<u8>)> = lock(&fake).queue("APP.REPLY").drain(..).collect();
    // Requests are forwarded several at a time: their replies may come in either
    // order, each with the CorrelId the back end gave it.
    recorded.sort_by_key(|(md, _)| md.CorrelId);
    for (i, (md, body)) in recorded.iter().enumerate() {
        assert_eq!(
            md.CorrelId,
            [7 + i as u8; 24],
            "the back end's CorrelId, passed on"
        );
        assert_eq!(body, format!("echo:{}", bodies[i]).as_bytes());
    }
    {
        let f = lock(&fake);
        let forwarded = f
            .puts
            .iter()
            .find(|p| p.queue == "BACKEND.IN" && p.md.MsgId == [7; 24])
            .unwrap();
        assert_eq!(string(&forwarded.md.ReplyToQ), "BACKEND.OUT");
        assert_eq!(forwarded.md.MsgId, [7; 24], "the request's MsgId kept");
        assert_eq!(forwarded.md.MsgType, 1, "MQMT_REQUEST");
    }
    let summary = recording.stop().await.unwrap();
    echo.abort();
    assert_eq!(summary.recorded, 2, "{summary:?}");
    assert_eq!(summary.timed_out, 1, "{summary:?}");
    assert_eq!(summary.unpaired, 1, "{summary:?}");
    assert!(
        summary
            .notes
            .iter()
            .any(|n| n.contains("stray reply") && n.contains("pairs with no request")),
        "{summary:?}"
    );
    assert!(
        lock(&fake).queue("BACKEND.OUT").is_empty(),
        "the stray reply is off the reply queue"
    );
    assert!(
        lock(&fake).queue("APP.REPLY").is_empty(),
        "nothing for the ignored one"
    );

    // Playback on the recorded mappings, the back end gone.
    let rt = serve_root(&fake, dir.path());
    for (i, b) in bodies.iter().enumerate() {
        let r = request(17 + i as u8, b, "APP.REPLY");
        lock(&fake).queue("APP.REQUEST").push_back(r);
    }
    until(&fake, "both played-back replies", |f| {
        f.queues.get("APP.REPLY").is_some_and(|q| q.len() == 2)
    })
    .await;
    rt.shutdown().await;
    let mut played: Vec<(mq::MQMD, Vec<u8>)> = lock(&fake).queue("APP.REPLY").drain(..).collect();
    played.sort_by_key(|(md, _)| md.CorrelId);
    for (i, (md, body)) in played.iter().enumerate() {
        assert_eq!(body, &recorded[i].1, "the recorded reply");
        assert_eq!(
            md.CorrelId,
            [17 + i as u8; 24],
            "MSGID_TO_CORRELID, as recorded"
        );
    }
}

/// Publishing on IBM MQ connections the way stubs' `message` listeners and
/// `POST /__admin/channels/send` do (through [`crate::publish::Publishers`]), over the
/// fake queue manager.
fn publishers(fake: &Shared) -> crate::publish::Publishers {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mq-connections.json"),
        json!([connection()]).to_string(),
    )
    .unwrap();
    let load = config::load(dir.path());
    let publishers = crate::publish::Publishers::default();
    let fake = fake.clone();
    publishers.replace(&load.connections, move |c| {
        let config::ConnectionKind::IbmMq(c) = c.kind.clone() else {
            panic!("not an IBM MQ connection")
        };
        Ok(Arc::new(IbmMqBroker::new(mock_mqi(&fake), c)) as Arc<dyn Broker>)
    });
    publishers
}

fn outgoing(destination: &str, topic: bool, body: &str) -> decoy_core::publish::OutgoingMessage {
    decoy_core::publish::OutgoingMessage {
        target: decoy_core::publish::MessageTarget {
            connection: "qm1".into(),
            destination: destination.into(),
            topic,
        },
        body: bytes::Bytes::from(body.to_owned()),
        properties: vec![
            ("event-type".into(), "order.created".into()),
            ("decoy-webhook-hops".into(), "1".into()),
        ],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_message_is_put_on_an_ibm_mq_queue_or_topic_with_its_properties() {
    use decoy_core::publish::MessagePublisher as _;
    let fake = fake_with_queues(&["ORDERS.EVENTS"]);
    let p = publishers(&fake);
    assert!(p.has_connection("qm1") && !p.has_connection("qm2"));
    p.publish(outgoing("ORDERS.EVENTS", false, r#"{"id":"A-17"}"#))
        .await
        .unwrap();
    p.publish(outgoing("orders/created", true, "on a topic"))
        .await
        .unwrap();
    let f = lock(&fake);
    let put = f.puts.iter().find(|p| p.queue == "ORDERS.EVENTS").unwrap();
    assert_eq!(put.body, br#"{"id":"A-17"}"#);
    assert_eq!(string(&put.md.Format), "MQSTR");
    assert_eq!(put.md.Persistence, 1, "MQPER_PERSISTENT");
    assert_eq!(put.md.MsgType, 8, "MQMT_DATAGRAM: an event, not a reply");
    assert_eq!(
        put.properties,
        [
            ("event-type".to_owned(), "order.created".to_owned()),
            ("decoy-webhook-hops".to_owned(), "1".to_owned())
        ]
    );
    assert_eq!(
        f.queues["ORDERS.EVENTS"].len(),
        1,
        "on the queue for a consumer"
    );
    let published = f
        .puts
        .iter()
        .find(|p| p.queue == "TOPIC:orders/created")
        .unwrap();
    assert_eq!(published.body, b"on a topic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_to_ibm_mq_that_cannot_be_done_says_what_failed() {
    use decoy_core::publish::{MessagePublisher as _, PublishError};
    let fake = fake_with_queues(&["ORDERS.EVENTS"]);
    let p = publishers(&fake);
    let missing = p
        .publish(outgoing("NO.SUCH.QUEUE", false, "x"))
        .await
        .unwrap_err();
    let PublishError::Broker(text) = &missing else {
        panic!("{missing:?}")
    };
    assert!(text.contains("NO.SUCH.QUEUE"), "{text}");
    let mut other = outgoing("ORDERS.EVENTS", false, "x");
    other.target.connection = "qm2".into();
    assert_eq!(
        p.publish(other).await.unwrap_err(),
        PublishError::UnknownConnection("qm2".into())
    );
    // A queue manager that is down: the publish fails naming it, and the next one,
    // once it is back, opens a new connection and goes through.
    let down = fake_with_queues(&["ORDERS.EVENTS"]);
    lock(&down).down = true;
    let p = publishers(&down);
    let failed = p
        .publish(outgoing("ORDERS.EVENTS", false, "lost"))
        .await
        .unwrap_err();
    assert!(failed.to_string().contains("QM1"), "{failed}");
    lock(&down).down = false;
    p.publish(outgoing("ORDERS.EVENTS", false, "after"))
        .await
        .unwrap();
    assert_eq!(lock(&down).queues["ORDERS.EVENTS"].len(), 1);
}

/// A sink that publishes each `message` listener of what it is handed through
/// `publishers`, as `decoy serve`'s webhook sender does (it renders, then publishes).
#[derive(Debug)]
struct PublishingSink(Arc<crate::publish::Publishers>);

impl decoy_core::webhooks::WebhookSink for PublishingSink {
    fn fire(&self, fired: decoy_core::webhooks::Fired) {
        use decoy_core::publish::MessagePublisher as _;
        for hook in fired.hooks.iter() {
            let call = hook
                .render(&fired.mapping_id, &fired.request, fired.answer.as_ref())
                .unwrap();
            let message = decoy_core::publish::OutgoingMessage {
                target: call.message.unwrap(),
                body: call.body.unwrap_or_default(),
                properties: call.headers,
            };
            let publish = self.0.publish(message);
            tokio::spawn(async move { publish.await.unwrap() });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ibm_mq_request_gets_its_reply_and_an_event_on_another_ibm_mq_queue() {
    let fake = fake_with_queues(&["DEV.QUEUE.1", "APP.REPLY", "AUDIT.EVENTS"]);
    let mut m = mapping();
    m["serveEventListeners"] = json!([{"name": "message", "parameters": {
        "connection": "qm1", "queue": "AUDIT.EVENTS", "body": "<audit/>",
        "properties": {"kind": "audit"}}}]);
    let load = config::load_for_test(&connection(), &[m]);
    let config::ConnectionKind::IbmMq(c) = load.connections[0].kind.clone() else {
        panic!("not an IBM MQ connection")
    };
    let sink = PublishingSink(Arc::new(publishers(&fake)));
    let metrics = Arc::new(TransportMetrics::default());
    let rt = MqRuntime::start(
        &load.connections,
        vec![Arc::new(IbmMqBroker::new(mock_mqi(&fake), c)) as Arc<dyn Broker>],
        load.mappings
            .into_iter()
            .map(|m| (Arc::new(m), Arc::default()))
            .collect(),
        move |_| (metrics.clone(), Arc::default()),
        Some(Arc::new(sink) as Arc<dyn decoy_core::webhooks::WebhookSink>),
        Arc::default(),
        crate::threads::MqThreads::current(),
    );
    let r = request(3, "<order id='3'/>", "APP.REPLY");
    lock(&fake).queue("DEV.QUEUE.1").push_back(r);
    until(&fake, "the reply and the event", |f| {
        f.queues.get("APP.REPLY").is_some_and(|q| q.len() == 1)
            && f.queues.get("AUDIT.EVENTS").is_some_and(|q| q.len() == 1)
    })
    .await;
    rt.shutdown().await;
    let f = lock(&fake);
    let reply_at = f.log.iter().position(|l| l == "PUT APP.REPLY").unwrap();
    let event_at = f.log.iter().position(|l| l == "PUT AUDIT.EVENTS").unwrap();
    assert!(
        reply_at < event_at,
        "the event after the reply: {:?}",
        f.log
    );
    let event = f.puts.iter().find(|p| p.queue == "AUDIT.EVENTS").unwrap();
    assert_eq!(event.body, b"<audit/>");
    assert_eq!(event.md.MsgType, 8, "MQMT_DATAGRAM");
    assert_eq!(event.properties, [("kind".to_owned(), "audit".to_owned())]);
}
