//! Where the request was sent: `scheme`, `host` and `port`, three parts WireMock
//! scores apart (the host and port weigh 10, the scheme 3).

use serde_json::{Map, Value};

use super::part::Part;
use crate::near_miss::{ReportRow, Score};
use crate::pattern::{Actual, StringPattern};
use decoy_spec::fields::{FieldError, FieldResult, Fields, as_str, as_u64, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["scheme", "host", "port"];

/// `scheme`: `http` or `https`, compared without case.
#[derive(Debug)]
pub struct Scheme(Option<String>);

/// `host`: a pattern over the host the request names (its `Host` header, or the
/// authority of an absolute URL).
#[derive(Debug)]
pub struct Host(Option<Box<StringPattern>>);

/// `port`: the port the request names.
#[derive(Debug)]
pub struct Port(Option<u16>);

impl Scheme {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Scheme(match obj.field("scheme") {
            Some(s) => Some(as_str(s, &join(path, "scheme"))?.to_ascii_lowercase()),
            None => None,
        }))
    }
}

impl Host {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Host(match obj.field("host") {
            Some(h) => Some(Box::new(StringPattern::parse(h, &join(path, "host"))?)),
            None => None,
        }))
    }

    fn actual<'r>(req: &'r RequestSnapshot) -> Option<std::borrow::Cow<'r, str>> {
        req.host_port().map(|(h, _)| h)
    }
}

impl Port {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Port(match obj.field("port") {
            Some(p) => {
                let ppath = join(path, "port");
                Some(
                    u16::try_from(as_u64(p, &ppath)?)
                        .map_err(|_| FieldError::new(ppath, "not a port number"))?,
                )
            }
            None => None,
        }))
    }

    fn actual(req: &RequestSnapshot) -> Option<u16> {
        req.host_port().map(|(_, p)| p)
    }
}

impl Part for Scheme {
    fn constrains(&self) -> bool {
        self.0.is_some()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.0.as_ref().is_none_or(|s| s == req.scheme)
    }

    fn score(&self, req: &RequestSnapshot) -> Score {
        Score::of(self.matches(req))
    }

    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        if let Some(s) = &self.0 {
            rows.push(ReportRow::part(
                "Scheme",
                s.clone(),
                req.scheme.to_owned(),
                s == req.scheme,
            ));
        }
    }
}

impl Part for Host {
    fn constrains(&self) -> bool {
        self.0.is_some()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        let Some(h) = &self.0 else { return true };
        h.matches_opt(Host::actual(req).as_deref().map(Actual::new).as_ref())
    }

    fn score(&self, req: &RequestSnapshot) -> Score {
        let Some(h) = &self.0 else {
            return Score::EXACT;
        };
        h.score(Host::actual(req).as_deref().map(Actual::new).as_ref())
    }

    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        let Some(h) = &self.0 else { return };
        let actual = Host::actual(req);
        let printed = format!("{}{}", h.operator(""), h.wm_expected());
        let exact = h.matches_opt(actual.as_deref().map(Actual::new).as_ref());
        rows.push(ReportRow::part(
            "Host",
            printed.trim().to_owned(),
            actual.map(|h| h.to_string()).unwrap_or_default(),
            exact,
        ));
    }
}

impl Part for Port {
    fn constrains(&self) -> bool {
        self.0.is_some()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.0.is_none_or(|port| Port::actual(req) == Some(port))
    }

    fn score(&self, req: &RequestSnapshot) -> Score {
        Score::of(self.matches(req))
    }

    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        let Some(port) = self.0 else { return };
        let actual = Port::actual(req);
        rows.push(ReportRow::part(
            "Port",
            port.to_string(),
            actual.map(|p| p.to_string()).unwrap_or_default(),
            actual == Some(port),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    fn obj(v: &Value) -> &Map<String, Value> {
        v.as_object().unwrap()
    }

    #[test]
    fn host_and_port_are_read_from_the_host_header() {
        let v = json!({"host": {"contains": "example"}, "port": 8443, "scheme": "HTTP"});
        let (host, port, scheme) = (
            Host::parse(obj(&v), "request").unwrap(),
            Port::parse(obj(&v), "request").unwrap(),
            Scheme::parse(obj(&v), "request").unwrap(),
        );
        let there = request("GET", "/", &[("host", "api.example.com:8443")], "");
        assert!(host.matches(&there) && port.matches(&there) && scheme.matches(&there));
        let elsewhere = request("GET", "/", &[("host", "other.org")], "");
        assert!(!host.matches(&elsewhere));
        assert!(!port.matches(&elsewhere));
        assert_eq!(
            rows_of(&host, &elsewhere),
            [row(
                "[contains] example",
                "other.org",
                Some("Host does not match")
            )]
        );
        assert_eq!(
            rows_of(&port, &request("GET", "/", &[], "")),
            [row("8443", "", Some("Port is not present"))]
        );
    }

    #[test]
    fn a_port_out_of_range_is_refused() {
        let e = Port::parse(obj(&json!({"port": 70000})), "request").unwrap_err();
        assert_eq!(e.path, "request.port");
    }

    #[test]
    fn unset_parts_match_every_request_and_print_no_row() {
        let none = json!({});
        let req = request("GET", "/", &[], "");
        let parts: [&dyn Part; 3] = [
            &Host::parse(obj(&none), "r").unwrap(),
            &Port::parse(obj(&none), "r").unwrap(),
            &Scheme::parse(obj(&none), "r").unwrap(),
        ];
        for p in parts {
            assert!(!p.constrains() && p.matches(&req) && p.score(&req).exact);
            assert!(rows_of(p, &req).is_empty());
        }
    }
}
