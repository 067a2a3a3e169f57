//! Certificates for the tests' TLS brokers, made with the `openssl` CLI: a CA and a
//! server certificate for 127.0.0.1 signed by it, valid for two days. decoy trusts
//! them through a connection's CA file field (`caFile`, `tlsCaFile`,
//! `caCertificateFile`); without it the system's trust store does not know the CA.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::process::succeeds;

/// The test's CA and a server certificate for 127.0.0.1 signed by it.
pub struct Certificates {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Made in `dir`; `None` (the test says it skipped) when the `openssl` CLI is
/// missing.
pub fn certificates(dir: &Path) -> Option<Certificates> {
    let p = |f: &str| dir.join(f);
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    if !succeeds(
        Command::new("openssl")
            .args(["req", "-x509", "-days", "2", "-subj", "/CN=decoy test CA"])
            .args(ec)
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            .arg("-keyout")
            .arg(p("ca.key"))
            .arg("-out")
            .arg(p("ca.pem")),
    ) {
        return None;
    }
    std::fs::write(
        p("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    assert!(succeeds(
        Command::new("openssl")
            .args(["req", "-subj", "/CN=127.0.0.1"])
            .args(ec)
            .arg("-keyout")
            .arg(p("server.key"))
            .arg("-out")
            .arg(p("server.csr"))
    ));
    assert!(succeeds(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
            .arg("-in")
            .arg(p("server.csr"))
            .arg("-CA")
            .arg(p("ca.pem"))
            .arg("-CAkey")
            .arg(p("ca.key"))
            .arg("-extfile")
            .arg(p("server.ext"))
            .arg("-out")
            .arg(p("server.pem"))
    ));
    Some(Certificates {
        ca: p("ca.pem"),
        cert: p("server.pem"),
        key: p("server.key"),
    })
}
