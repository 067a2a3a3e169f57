//! A reader for Java KeyStore (JKS) files, the default `--https-keystore` format of
//! WireMock and of `keytool` before Java 9.
//!
//! The format (Sun's `JavaKeyStore`): magic `FEEDFEED`, a version (1 or 2), an entry
//! count, the entries (a private key with its certificate chain, or a trusted
//! certificate), then a SHA-1 digest of the store password (UTF-16BE), the words
//! "Mighty Aphrodite" and everything before it. A private key is a PKCS#8
//! `EncryptedPrivateKeyInfo` whose algorithm is Sun's key protector
//! (1.3.6.1.4.1.42.2.17.1.1): 20 bytes of salt, the key XORed with a SHA-1 stream of
//! the key password and the salt, and a SHA-1 check of the password and the plain key.
//!
//! Written here rather than taken from a crate: `p12-keystore` reads PKCS#12 only, and
//! the one JKS crate indexes its input without bounds checks (a truncated file would
//! panic) and pulls in a release candidate of `p12-keystore`. This is about 150 lines
//! over `ring`'s SHA-1, which decoy already links.

use ring::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY as SHA1};

pub const MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];
const JCEKS_MAGIC: [u8; 4] = [0xCE, 0xCE, 0xCE, 0xCE];
/// 1.3.6.1.4.1.42.2.17.1.1 in DER.
const KEY_PROTECTOR_OID: [u8; 10] = [0x2B, 0x06, 0x01, 0x04, 0x01, 0x2A, 0x02, 0x11, 0x01, 0x01];

/// What a JKS file holds: private keys with their chains, and trusted certificates.
#[derive(Debug, Default)]
pub struct Jks {
    pub keys: Vec<KeyEntry>,
    /// Trusted certificates (DER).
    pub trusted: Vec<Vec<u8>>,
}

#[derive(Debug)]
pub struct KeyEntry {
    pub alias: String,
    /// The key as stored: an `EncryptedPrivateKeyInfo`; see [`KeyEntry::decrypt`].
    protected: Vec<u8>,
    /// Certificates (DER), the server's first.
    pub chain: Vec<Vec<u8>>,
}

pub fn is_jks(data: &[u8]) -> bool {
    data.starts_with(&MAGIC) || data.starts_with(&JCEKS_MAGIC)
}

fn utf16be(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or("the file is truncated")?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn utf(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn cert(&mut self, version: u32) -> Result<Vec<u8>, String> {
        if version == 2 {
            let kind = self.utf()?;
            if kind != "X.509" {
                return Err(format!(
                    "it holds a {kind:?} certificate; only X.509 is supported"
                ));
            }
        }
        self.bytes()
    }
}

/// Parses a JKS file and checks its integrity with `password` (the store password).
pub fn parse(data: &[u8], password: &str) -> Result<Jks, String> {
    if data.starts_with(&JCEKS_MAGIC) {
        return Err("it is a JCEKS keystore, which decoy cannot read; convert it with `keytool -importkeystore -deststoretype pkcs12`".into());
    }
    if !data.starts_with(&MAGIC) {
        return Err("it is not a JKS keystore".into());
    }
    if data.len() < 20 + 12 {
        return Err("the file is truncated".into());
    }
    let (body, digest) = data.split_at(data.len() - 20);
    let mut ctx = Context::new(&SHA1);
    ctx.update(&utf16be(password));
    ctx.update(b"Mighty Aphrodite");
    ctx.update(body);
    if ctx.finish().as_ref() != digest {
        return Err("the keystore password is wrong, or the file is corrupt".into());
    }
    let mut r = Reader { data: body, pos: 4 };
    let version = r.u32()?;
    if version != 1 && version != 2 {
        return Err(format!("unknown JKS version {version}"));
    }
    let count = r.u32()?;
    let mut out = Jks::default();
    for _ in 0..count {
        match r.u32()? {
            1 => {
                let alias = r.utf()?;
                r.take(8)?; // creation time
                let protected = r.bytes()?;
                let n = r.u32()?;
                let mut chain = Vec::new();
                for _ in 0..n {
                    chain.push(r.cert(version)?);
                }
                out.keys.push(KeyEntry {
                    alias,
                    protected,
                    chain,
                });
            }
            2 => {
                r.utf()?;
                r.take(8)?;
                out.trusted.push(r.cert(version)?);
            }
            tag => return Err(format!("unknown JKS entry type {tag}")),
        }
    }
    Ok(out)
}

/// One DER element: its tag and contents, and what follows it.
pub(crate) fn der(data: &[u8]) -> Result<(u8, &[u8], &[u8]), String> {
    let bad = || "the private key is not a valid DER structure".to_owned();
    let (&tag, rest) = data.split_first().ok_or_else(bad)?;
    let (&first, mut rest) = rest.split_first().ok_or_else(bad)?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7F) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return Err(bad());
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return Err(bad());
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

impl KeyEntry {
    /// The PKCS#8 private key, decrypted with the key password.
    pub fn decrypt(&self, password: &str) -> Result<Vec<u8>, String> {
        let (tag, info, _) = der(&self.protected)?;
        if tag != 0x30 {
            return Err("the private key is not an EncryptedPrivateKeyInfo".into());
        }
        let (tag, alg, rest) = der(info)?;
        let (oid_tag, oid, _) = der(alg)?;
        if tag != 0x30 || oid_tag != 0x06 || oid != KEY_PROTECTOR_OID {
            return Err(format!(
                "the key {:?} is protected by an algorithm other than JKS's own; convert the store with `keytool -importkeystore -deststoretype pkcs12`",
                self.alias
            ));
        }
        let (tag, data, _) = der(rest)?;
        if tag != 0x04 || data.len() < 40 {
            return Err("the protected private key is malformed".into());
        }
        let (salt, rest) = data.split_at(20);
        let (encrypted, check) = rest.split_at(rest.len() - 20);
        let pw = utf16be(password);
        let mut plain = Vec::with_capacity(encrypted.len());
        let mut digest = salt.to_vec();
        for chunk in encrypted.chunks(20) {
            let mut ctx = Context::new(&SHA1);
            ctx.update(&pw);
            ctx.update(&digest);
            digest = ctx.finish().as_ref().to_vec();
            plain.extend(chunk.iter().zip(&digest).map(|(a, b)| a ^ b));
        }
        let mut ctx = Context::new(&SHA1);
        ctx.update(&pw);
        ctx.update(&plain);
        if ctx.finish().as_ref() != check {
            return Err(format!(
                "the key password is wrong for the key {:?} (--key-manager-password)",
                self.alias
            ));
        }
        Ok(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_and_foreign_input_is_an_error_not_a_panic() {
        assert!(parse(b"", "password").is_err());
        assert!(parse(&MAGIC, "password").is_err());
        let mut fake = MAGIC.to_vec();
        fake.extend([0u8; 40]);
        assert!(parse(&fake, "password").is_err());
        assert!(parse(&JCEKS_MAGIC, "x").unwrap_err().contains("JCEKS"));
        for n in 0..8 {
            let k = KeyEntry {
                alias: "a".into(),
                protected: vec![0x30, 0x82, 0xFF, 0xFF, 0x30][..n.min(5)].to_vec(),
                chain: vec![],
            };
            assert!(k.decrypt("p").is_err());
        }
    }
}
