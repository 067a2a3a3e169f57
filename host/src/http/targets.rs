//! `--allow-proxy-targets` and `--deny-proxy-targets`: which services proxy stubs,
//! `--proxy-all`, recording and webhooks may reach (every request of decoy's own goes
//! through `client.rs`, which applies them), read as WireMock 3 reads them.
//!
//! Each flag is a comma-separated list of entries of three kinds: one IPv4 address
//! (`10.1.2.3`), an IPv4 range (`192.168.10.1-192.168.11.254`, both ends included)
//! and a host name wildcard (`*.example.com`, where `*` stands for one character or
//! more). A target is allowed when it passes both lists:
//!
//! - a target named by a host name must match an allowed wildcard (any name, when
//!   the allow list has none) and no denied wildcard; then every address the name
//!   resolves to is checked as below, so a name cannot be used to reach a denied
//!   address;
//! - an address (written in the URL, or resolved) must be in an allowed address or
//!   range (any address, when the allow list has none) and in no denied one.
//!
//! WireMock's rules only name IPv4 addresses, so an IPv6 address never matches one:
//! it is allowed unless the allow list names addresses. A proxied request refused by
//! these rules is answered as WireMock answers it: a 500 with the text
//! "The target proxy address is denied in WireMock's configuration."; a refused
//! webhook is not sent, and is logged and counted.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};

/// WireMock's answer body for a refused target.
pub const DENIED: &str = "The target proxy address is denied in WireMock's configuration.";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Addresses {
    One(Ipv4Addr),
    Range(u32, u32),
}

impl Addresses {
    fn contains(&self, ip: Ipv4Addr) -> bool {
        match self {
            Addresses::One(a) => *a == ip,
            Addresses::Range(lo, hi) => (*lo..=*hi).contains(&u32::from(ip)),
        }
    }
}

/// The rules of both flags; the default allows everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyTargets {
    allow_addresses: Vec<Addresses>,
    deny_addresses: Vec<Addresses>,
    allow_names: Vec<String>,
    deny_names: Vec<String>,
}

/// `d.d.d.d` with one to three digits in each part: what WireMock takes for an
/// address rather than a name (the parts are then checked to be 0-255).
fn looks_like_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

fn ipv4(s: &str, flag: &str) -> Result<Ipv4Addr, String> {
    s.parse()
        .map_err(|_| format!("{flag}: {s} is not a valid IP address"))
}

impl ProxyTargets {
    /// Reads the two flags' values; an error names the flag and the entry.
    pub fn parse(allow: Option<&str>, deny: Option<&str>) -> Result<ProxyTargets, String> {
        let mut out = ProxyTargets::default();
        for (flag, list, addresses, names) in [
            (
                "--allow-proxy-targets",
                allow,
                &mut out.allow_addresses,
                &mut out.allow_names,
            ),
            (
                "--deny-proxy-targets",
                deny,
                &mut out.deny_addresses,
                &mut out.deny_names,
            ),
        ] {
            let Some(list) = list else { continue };
            for entry in list.split(',').map(str::trim) {
                if entry.is_empty() {
                    return Err(format!(
                        "{flag}: an empty entry is not a valid network address"
                    ));
                }
                if looks_like_ipv4(entry) {
                    addresses.push(Addresses::One(ipv4(entry, flag)?));
                } else if let Some((lo, hi)) = entry.split_once('-')
                    && looks_like_ipv4(lo)
                    && looks_like_ipv4(hi)
                {
                    let (lo, hi) = (u32::from(ipv4(lo, flag)?), u32::from(ipv4(hi, flag)?));
                    addresses.push(Addresses::Range(lo, hi));
                } else {
                    names.push(entry.to_owned());
                }
            }
        }
        Ok(out)
    }

    /// No rule at all: nothing to check.
    pub fn allows_everything(&self) -> bool {
        *self == ProxyTargets::default()
    }

    /// Is this address allowed?
    pub fn allows_address(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => {
                (self.allow_addresses.is_empty()
                    || self.allow_addresses.iter().any(|r| r.contains(v4)))
                    && !self.deny_addresses.iter().any(|r| r.contains(v4))
            }
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => self.allows_address(IpAddr::V4(v4)),
                None => self.allow_addresses.is_empty(),
            },
        }
    }

    /// Is this host, as written in the target URL (a name or an address), allowed?
    /// A name's resolved addresses are checked separately, when it is resolved.
    pub fn allows_host(&self, host: &str) -> bool {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.allows_address(ip);
        }
        (self.allow_names.is_empty() || self.allow_names.iter().any(|p| wildcard(p, host)))
            && !self.deny_names.iter().any(|p| wildcard(p, host))
    }
}

/// WireMock's host name wildcard: the whole name must match, `*` is one character
/// or more, everything else is literal.
fn wildcard(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    // Each star takes at least one character, then the next literal is found at its
    // leftmost place: for patterns whose only wildcard is `*`, leftmost is enough.
    for part in middle {
        let mut chars = rest.chars();
        if chars.next().is_none() {
            return false;
        }
        let after = chars.as_str();
        match after.find(part) {
            Some(i) => rest = &after[i + part.len()..],
            None => return false,
        }
    }
    rest.len() > last.len() && rest.ends_with(last)
}

/// The proxy target was refused by the rules (for the answer's text).
#[derive(Debug)]
pub struct Prohibited;

impl std::fmt::Display for Prohibited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(DENIED)
    }
}

impl std::error::Error for Prohibited {}

/// Was `err`, or anything it wraps, a refusal by the rules?
pub fn is_prohibited(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<Prohibited>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.get_ref().is_some_and(|inner| inner.is::<Prohibited>())
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// The system resolver, refusing a name when any address it resolves to is not
/// allowed (so `allowed-name.example` cannot point at a denied address).
#[derive(Debug, Clone)]
pub struct CheckedResolver {
    inner: GaiResolver,
    rules: Arc<ProxyTargets>,
}

impl CheckedResolver {
    pub fn new(rules: Arc<ProxyTargets>) -> CheckedResolver {
        CheckedResolver {
            inner: GaiResolver::new(),
            rules,
        }
    }
}

type Addrs = std::vec::IntoIter<SocketAddr>;

impl tower_service::Service<Name> for CheckedResolver {
    type Response = Addrs;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Addrs, std::io::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::io::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let rules = self.rules.clone();
        let resolving = self.inner.call(name);
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = resolving.await?.collect();
            if addrs.iter().all(|a| rules.allows_address(a.ip())) {
                Ok(addrs.into_iter())
            } else {
                Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    Prohibited,
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: Option<&str>, deny: Option<&str>) -> ProxyTargets {
        ProxyTargets::parse(allow, deny).unwrap()
    }

    #[test]
    fn addresses_and_ranges_are_denied_and_the_rest_allowed() {
        let r = rules(None, Some("10.1.2.3, 192.168.10.1-192.168.11.254"));
        assert!(!r.allows_host("10.1.2.3"));
        assert!(!r.allows_host("192.168.10.255"));
        assert!(!r.allows_host("192.168.11.254"));
        assert!(r.allows_host("192.168.11.255"));
        assert!(r.allows_host("10.1.2.4"));
        assert!(r.allows_host("example.com"), "no name rule");
        assert!(r.allows_host("[::1]"), "IPv6 is never named by a rule");
    }

    #[test]
    fn an_allow_list_allows_only_what_it_names() {
        let r = rules(Some("127.0.0.1,*.example.com"), None);
        assert!(r.allows_host("127.0.0.1"));
        assert!(!r.allows_host("127.0.0.2"));
        assert!(r.allows_host("api.example.com"));
        assert!(
            !r.allows_host("example.com"),
            "the star takes one character or more"
        );
        assert!(!r.allows_host("api.example.org"));
        assert!(!r.allows_address("::1".parse().unwrap()));
        assert!(r.allows_address("::ffff:127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn denied_names_win_over_allowed_ones() {
        let r = rules(Some("*.example.com"), Some("admin.*.com"));
        assert!(r.allows_host("api.example.com"));
        assert!(!r.allows_host("admin.example.com"));
    }

    #[test]
    fn wildcards_match_whole_names() {
        assert!(wildcard("*.wiremock.org", "noway.wiremock.org"));
        assert!(!wildcard("*.wiremock.org", "noway.wiremock.org.evil"));
        assert!(wildcard("a*b*c", "axbyc"));
        assert!(!wildcard("a*b*c", "abc"));
        assert!(wildcard("localhost", "localhost"));
        assert!(!wildcard("localhost", "localhost2"));
        assert!(wildcard("*", "x"));
        assert!(!wildcard("*", ""));
    }

    #[test]
    fn bad_entries_are_errors_naming_the_flag() {
        let e = ProxyTargets::parse(Some("10.0.0.300"), None).unwrap_err();
        assert_eq!(
            e,
            "--allow-proxy-targets: 10.0.0.300 is not a valid IP address"
        );
        let e = ProxyTargets::parse(None, Some("10.0.0.1,,x")).unwrap_err();
        assert!(e.starts_with("--deny-proxy-targets: an empty entry"), "{e}");
        assert!(ProxyTargets::parse(None, None).unwrap().allows_everything());
    }
}
