//! TLS for `--https-port`: the server's certificate and key from PEM files
//! (`--https-cert`/`--https-key`), from a Java keystore as WireMock takes it
//! (`--https-keystore`: JKS or PKCS#12, or PEM), or a self-signed certificate generated
//! at start for `localhost` and `127.0.0.1`. `--https-require-client-cert` asks every
//! client for a certificate issued by one in `--https-truststore`. ALPN offers `h2`
//! then `http/1.1`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::jks;

/// WireMock's default for every keystore password.
pub const DEFAULT_PASSWORD: &str = "password";

/// Where the HTTPS listener's identity and trusted client issuers come from.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// PEM certificate chain and key (decoy's own flags).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// `--https-keystore`: JKS, PKCS#12 or PEM (found from the content).
    pub keystore: Option<PathBuf>,
    pub keystore_password: String,
    /// `--key-manager-password`: the private key's own password (JKS).
    pub key_password: String,
    /// `--keystore-type`: checked against the content when given.
    pub keystore_type: Option<String>,
    pub truststore: Option<PathBuf>,
    pub truststore_password: String,
    pub truststore_type: Option<String>,
    /// `--https-require-client-cert`: refuse clients without a trusted certificate.
    pub require_client_cert: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            cert: None,
            key: None,
            keystore: None,
            keystore_password: DEFAULT_PASSWORD.into(),
            key_password: DEFAULT_PASSWORD.into(),
            keystore_type: None,
            truststore: None,
            truststore_password: DEFAULT_PASSWORD.into(),
            truststore_type: None,
            require_client_cert: false,
        }
    }
}

/// PEM-only entry point, kept for callers that have just a certificate and a key.
pub fn server_config(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    server_config_from(&TlsSettings {
        cert: cert.map(Path::to_path_buf),
        key: key.map(Path::to_path_buf),
        ..TlsSettings::default()
    })
}

pub fn server_config_from(s: &TlsSettings) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let (certs, key) = match (&s.cert, &s.key, &s.keystore) {
        (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
            bail!(
                "--https-keystore and --https-cert/--https-key both name the server's certificate: give one or the other"
            )
        }
        (Some(c), Some(k), None) => load_pem(c, k)?,
        (None, None, Some(ks)) => {
            load_keystore(ks, s).with_context(|| format!("--https-keystore {}", ks.display()))?
        }
        (None, None, None) => self_signed()?,
        _ => bail!(
            "--https-cert and --https-key go together: give both, or neither for a self-signed certificate"
        ),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("setting up TLS protocol versions")?;
    let builder = if s.require_client_cert {
        let Some(ts) = &s.truststore else {
            bail!(
                "--https-require-client-cert needs --https-truststore: the certificates client certificates must be issued by"
            )
        };
        let mut roots = rustls::RootCertStore::empty();
        let trusted = load_truststore(ts, s)
            .with_context(|| format!("--https-truststore {}", ts.display()))?;
        for c in trusted {
            roots.add(c).with_context(|| {
                format!(
                    "--https-truststore {}: a certificate is not usable",
                    ts.display()
                )
            })?;
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .context("--https-truststore holds no usable certificate")?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .context("the certificate and key do not form a usable pair")?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

type CertAndKey = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// A DER element from its tag and contents.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

/// Java writes EC private keys without their public half, which `ring` needs; it is
/// taken from the certificate. Any other key (or one that has it) is returned as is.
fn with_ec_public_key(pkcs8: Vec<u8>, cert: Option<&[u8]>) -> Vec<u8> {
    fn rebuild(pkcs8: &[u8], cert: &[u8]) -> Option<Vec<u8>> {
        const EC_PUBLIC_KEY: [u8; 7] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
        let (_, info, _) = jks::der(pkcs8).ok()?;
        let (_, version, rest) = jks::der(info).ok()?;
        let (_, alg, rest) = jks::der(rest).ok()?;
        let (_, oid, curve_and_rest) = jks::der(alg).ok()?;
        if oid != EC_PUBLIC_KEY {
            return None;
        }
        let (curve_tag, curve, _) = jks::der(curve_and_rest).ok()?;
        let (_, ec_key, _) = jks::der(rest).ok()?;
        let (_, ec, _) = jks::der(ec_key).ok()?;
        let (_, _one, rest) = jks::der(ec).ok()?;
        let (_, private, mut rest) = jks::der(rest).ok()?;
        while !rest.is_empty() {
            let (tag, _, next) = jks::der(rest).ok()?;
            if tag == 0xA1 {
                return None; // the public key is there
            }
            rest = next;
        }
        // Certificate → TBSCertificate → [0] version?, serial, signature, issuer,
        // validity, subject, SubjectPublicKeyInfo { algorithm, BIT STRING }.
        let (_, c, _) = jks::der(cert).ok()?;
        let (_, tbs, _) = jks::der(c).ok()?;
        let mut rest = tbs;
        let (tag, _, next) = jks::der(rest).ok()?;
        if tag == 0xA0 {
            rest = next;
        }
        for _ in 0..5 {
            rest = jks::der(rest).ok()?.2;
        }
        let (_, spki, _) = jks::der(rest).ok()?;
        let (_, _, rest) = jks::der(spki).ok()?;
        let (tag, public, _) = jks::der(rest).ok()?;
        if tag != 0x03 {
            return None;
        }
        let mut ec = tlv(0x02, &[1]);
        ec.extend(tlv(0x04, private));
        ec.extend(tlv(0xA0, &tlv(curve_tag, curve)));
        ec.extend(tlv(0xA1, &tlv(0x03, public)));
        let mut info = tlv(0x02, version);
        info.extend(tlv(0x30, alg));
        info.extend(tlv(0x04, &tlv(0x30, &ec)));
        Some(tlv(0x30, &info))
    }
    match cert.and_then(|c| rebuild(&pkcs8, c)) {
        Some(fixed) => fixed,
        None => pkcs8,
    }
}

/// The kind of store a file holds, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Jks,
    Pkcs12,
    Pem,
}

fn kind_of(data: &[u8], declared: Option<&str>, flag: &str) -> anyhow::Result<Kind> {
    let found = if jks::is_jks(data) {
        Kind::Jks
    } else if data.starts_with(b"-----BEGIN") || data.trim_ascii_start().starts_with(b"-----BEGIN")
    {
        Kind::Pem
    } else if data.first() == Some(&0x30) {
        Kind::Pkcs12
    } else {
        bail!("the file is neither a JKS nor a PKCS#12 keystore, nor PEM")
    };
    if let Some(t) = declared {
        let declared = match t.to_ascii_lowercase().as_str() {
            "jks" => Kind::Jks,
            "pkcs12" | "p12" | "pfx" => Kind::Pkcs12,
            "pem" => Kind::Pem,
            other => {
                bail!("{flag} {other:?} is not a keystore type decoy reads (jks, pkcs12, pem)")
            }
        };
        // Java's JKS type reads PKCS#12 files too (keystore.type.compat), and WireMock
        // defaults to JKS, so only a PKCS#12 or PEM declaration is held to the content.
        if declared != found && declared != Kind::Jks {
            bail!("{flag} is {t} but the file holds a {found:?} store");
        }
    }
    Ok(found)
}

fn load_keystore(path: &Path, s: &TlsSettings) -> anyhow::Result<CertAndKey> {
    let data = std::fs::read(path).context("cannot read the keystore")?;
    match kind_of(&data, s.keystore_type.as_deref(), "--keystore-type")? {
        Kind::Pem => {
            let (certs, key) = pem_parts(&data)?;
            let key = key.context("the PEM file holds no private key")?;
            Ok((certs, key))
        }
        Kind::Jks => {
            let store = jks::parse(&data, &s.keystore_password)
                .map_err(|e| anyhow!("{e} (--keystore-password)"))?;
            let entry = store
                .keys
                .first()
                .context("the keystore holds no private key entry")?;
            let key = entry
                .decrypt(&s.key_password)
                .or_else(|e| entry.decrypt(&s.keystore_password).map_err(|_| e))
                .map_err(|e| anyhow!(e))?;
            let certs = entry
                .chain
                .iter()
                .map(|c| CertificateDer::from(c.clone()))
                .collect();
            let key = with_ec_public_key(key, entry.chain.first().map(Vec::as_slice));
            Ok((certs, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key))))
        }
        Kind::Pkcs12 => {
            let store = p12_keystore::KeyStore::from_pkcs12(&data, &s.keystore_password)
                .or_else(|e| {
                    p12_keystore::KeyStore::from_pkcs12(&data, &s.key_password).map_err(|_| e)
                })
                .map_err(|e| {
                    anyhow!("cannot open the PKCS#12 keystore: {e} (--keystore-password)")
                })?;
            let (_, chain) = store
                .private_key_chain()
                .context("the keystore holds no private key entry")?;
            let certs = chain
                .chain()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect();
            let key = with_ec_public_key(
                chain.key().to_vec(),
                chain.chain().first().map(|c| c.as_der()),
            );
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key));
            Ok((certs, key))
        }
    }
}

fn load_truststore(path: &Path, s: &TlsSettings) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let data = std::fs::read(path).context("cannot read the truststore")?;
    let certs: Vec<CertificateDer<'static>> =
        match kind_of(&data, s.truststore_type.as_deref(), "--truststore-type")? {
            Kind::Pem => pem_parts(&data)?.0,
            Kind::Jks => {
                let store = jks::parse(&data, &s.truststore_password)
                    .map_err(|e| anyhow!("{e} (--truststore-password)"))?;
                store
                    .trusted
                    .into_iter()
                    .chain(
                        store
                            .keys
                            .into_iter()
                            .flat_map(|k| k.chain.into_iter().take(1)),
                    )
                    .map(CertificateDer::from)
                    .collect()
            }
            Kind::Pkcs12 => {
                let store = p12_keystore::KeyStore::from_pkcs12(&data, &s.truststore_password)
                    .map_err(|e| {
                        anyhow!("cannot open the PKCS#12 truststore: {e} (--truststore-password)")
                    })?;
                store
                    .entries()
                    .flat_map(|(_, e)| match e {
                        p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => k
                            .chain()
                            .iter()
                            .take(1)
                            .map(|c| c.as_der().to_vec())
                            .collect(),
                        _ => vec![],
                    })
                    .map(CertificateDer::from)
                    .collect()
            }
        };
    if certs.is_empty() {
        bail!("the truststore holds no certificate");
    }
    Ok(certs)
}

fn pem_parts(
    data: &[u8],
) -> anyhow::Result<(Vec<CertificateDer<'static>>, Option<PrivateKeyDer<'static>>)> {
    let certs = rustls_pemfile::certs(&mut &data[..])
        .collect::<Result<Vec<_>, _>>()
        .context("not a valid PEM file")?;
    if certs.is_empty() {
        bail!("the PEM file holds no certificate");
    }
    let key = rustls_pemfile::private_key(&mut &data[..]).context("not a valid PEM file")?;
    Ok((certs, key))
}

fn load_pem(cert: &Path, key: &Path) -> anyhow::Result<CertAndKey> {
    let cert_pem = std::fs::read(cert)
        .with_context(|| format!("cannot read certificate {}", cert.display()))?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{} is not a PEM certificate file", cert.display()))?;
    if certs.is_empty() {
        bail!("{} holds no PEM certificate", cert.display());
    }
    let key_pem =
        std::fs::read(key).with_context(|| format!("cannot read private key {}", key.display()))?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .with_context(|| format!("{} is not a PEM private key file", key.display()))?
        .with_context(|| format!("{} holds no PEM private key", key.display()))?;
    Ok((certs, key))
}

fn self_signed() -> anyhow::Result<CertAndKey> {
    let c =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .context("generating a self-signed certificate")?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.key_pair.serialize_der()));
    Ok((vec![c.cert.der().clone()], key))
}
