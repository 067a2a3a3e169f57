//! Loading IBM's client library and connecting to a queue manager (MQCONNX as a
//! client), and what its reason codes mean to the adapter.

use super::*;

/// What the adapter needs of an MQ library: the real one loaded with dlopen, or
/// `mqi`'s mock in tests.
pub trait MqLibrary: Library<MQ: Mqi> + Clone + Send + Sync + 'static {}
impl<T: Library<MQ: Mqi> + Clone + Send + Sync + 'static> MqLibrary for T {}

/// The loaded client library, shared by every IBM MQ connection of the process.
pub type ClientLibrary = Arc<libmqm_sys::dlopen2::MqmContainer>;

/// Loads `libmqm_r.so` from `path` once per process.
pub fn load_client(path: &Path) -> Result<ClientLibrary, String> {
    static LOADED: OnceLock<Result<ClientLibrary, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            #[allow(unsafe_code)]
            // SAFETY: loading a shared library runs its initialisers. The path is IBM's
            // client library, found in the directories the operator configured
            // (MQ_INSTALLATION_PATH, /opt/mqm/lib64, LD_LIBRARY_PATH); loading it is
            // what linking against it would do. Its functions are called only through
            // `mqi`, with the signatures of IBM's cmqc.h that `libmqm-sys` declares.
            let c = unsafe { dlopen2::wrapper::Container::load(path) };
            c.map(Arc::new)
                .map_err(|e| format!("cannot load {}: {e}", path.display()))
        })
        .clone()
}

/// Where the IBM MQ client library is looked for, in order: `$MQ_INSTALLATION_PATH`
/// (as IBM's `setmqenv` sets it), `/opt/mqm` (the default install), and the
/// directories of `LD_LIBRARY_PATH`.
pub fn library_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = std::env::var_os("MQ_INSTALLATION_PATH") {
        let p = PathBuf::from(p);
        dirs.push(p.join("lib64"));
        dirs.push(p.join("lib"));
    }
    dirs.push(PathBuf::from("/opt/mqm/lib64"));
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&ld).filter(|d| !d.as_os_str().is_empty()));
    }
    dirs
}

/// The first `libmqm_r.so` in `dirs`.
pub fn find_client(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .map(|d| d.join("libmqm_r.so"))
        .find(|p| p.is_file())
}

/// The message `decoy serve` gives when an `ibm-mq` connection is configured and
/// the client library is not installed.
pub fn missing_client_message(connection: &str, dirs: &[PathBuf]) -> String {
    format!(
        "connection {connection:?} is an IBM MQ connection, and the IBM MQ client library \
         (libmqm_r.so) was not found; looked in {}. Install IBM's MQ redistributable client \
         (https://ibm.biz/mq94redistclients), unpack it and set MQ_INSTALLATION_PATH to where \
         it is (or install it in /opt/mqm)",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

pub(super) fn mq_err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::new(format!("{what}: {e}"))
}

/// `SSLPEER`: the distinguished name the queue manager's certificate must match.
/// `mqi` 0.4 has no option for it, so it is set on the client channel definition
/// here.
pub(super) struct PeerName<'a>(&'a str);

#[allow(unsafe_code)]
// SAFETY: the channel definition keeps a pointer to the name's bytes and their
// length; the bytes are borrowed for 'a, the lifetime `mqi` binds the connect call's
// structures to, so they outlive the MQCONNX that reads them. Nothing else is set.
unsafe impl<'a> ConnectOption<'a> for PeerName<'a> {
    fn apply_param(&self, s: &mut ConnectStructs<'a>) -> ConnectStructFlags {
        s.cd.set_min_version(libmqm_sys::MQCD_VERSION_7);
        s.cd.SSLPeerNamePtr = self.0.as_ptr().cast_mut().cast();
        s.cd.SSLPeerNameLength = i32::try_from(self.0.len()).unwrap_or(i32::MAX);
        CONNECT_HAS_CD
    }
}

/// A connection handle, used only on the thread that made it.
pub type Conn<L> = mqi::Connection<L, ThreadNone>;

/// MQCONNX as a client: channel, host and port as an MQSERVER string would give
/// them, the queue manager's name, user and password in an MQCSP, and TLS when a
/// cipher is named (the key repository is the client's: `MQSSLKEYR`).
pub fn connect<L: MqLibrary>(lib: L, c: &IbmMqConfig) -> Result<Conn<L>, BrokerError> {
    let server = format!("{}/TCP/{}({})", c.channel, c.hostname, c.port);
    let server = MqServer::try_from(server.as_str())
        .map_err(|e| mq_err(format!("channel {:?} on {}", c.channel, c.hostname), e))?;
    let qm = QueueManagerName::from_str(&c.queue_manager)
        .map_err(|e| mq_err(format!("queue manager name {:?}", c.queue_manager), e))?;
    let cipher = c
        .ssl_cipher_suite
        .as_deref()
        .map(CipherSpec::from_str)
        .transpose()
        .map_err(|e| mq_err("sslCipherSuite", e))?;
    let password = c.password.clone().unwrap_or_default();
    let creds = c
        .username
        .as_deref()
        .map(|u| Credentials::User(u, password.as_str().into()));
    let peer = c.ssl_peer_name.as_deref().map(PeerName);
    let options = (
        ApplName(mqi::mqstr!("decoy")),
        qm,
        server,
        creds,
        cipher,
        peer,
    );
    mqi::connect_lib::<ThreadNone, L>(lib, &options)
        .map(|c| c.discard_warning())
        .map_err(|e| mq_err(format!("cannot connect to {}", describe(c)), e))
}

/// `QM1 via DEV.APP.SVRCONN on mq.example.com(1414)`: no password.
pub fn describe(c: &IbmMqConfig) -> String {
    format!(
        "{} via {} on {}({})",
        c.queue_manager, c.channel, c.hostname, c.port
    )
}

/// Reason codes after which a connection handle is of no more use.
pub(super) fn connection_lost(rc: mqi::types::MQRC) -> bool {
    [
        constants::MQRC_CONNECTION_BROKEN,
        constants::MQRC_HCONN_ERROR,
        constants::MQRC_Q_MGR_QUIESCING,
        constants::MQRC_Q_MGR_STOPPING,
        constants::MQRC_CONNECTION_QUIESCING,
        constants::MQRC_CONNECTION_STOPPING,
        constants::MQRC_Q_MGR_NOT_AVAILABLE,
    ]
    .contains(&rc)
}

/// Reason codes for a destination that does not exist.
pub(super) fn unknown_destination(rc: mqi::types::MQRC) -> bool {
    [
        constants::MQRC_UNKNOWN_OBJECT_NAME,
        constants::MQRC_UNKNOWN_REMOTE_Q_MGR,
        constants::MQRC_UNKNOWN_ALIAS_BASE_Q,
        constants::MQRC_UNKNOWN_XMIT_Q,
    ]
    .contains(&rc)
}
