//! TLS for `--https-port`: a PEM certificate and key, or a self-signed certificate
//! generated at start for `localhost` and `127.0.0.1`. ALPN offers `h2` then `http/1.1`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub fn server_config(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let (certs, key) = match (cert, key) {
        (Some(c), Some(k)) => load_pem(c, k)?,
        (None, None) => self_signed()?,
        _ => bail!(
            "--https-cert and --https-key go together: give both, or neither for a self-signed certificate"
        ),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("setting up TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the certificate and key do not form a usable pair")?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

type CertAndKey = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

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
