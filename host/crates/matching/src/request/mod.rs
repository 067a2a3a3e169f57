//! The `request` object of a mapping, compiled, and evaluated against a
//! [`RequestSnapshot`].
//!
//! Each part of a request a stub can constrain has its own module, which holds
//! everything about that part: how it is parsed from the stub's JSON (and its field
//! names), whether a request matches it, how close a request came (WireMock's
//! score) and the rows it adds to the "Request was not matched" report. They are
//! [`method`], [`url`] and the [`path_params`] of a template, [`origin`] (scheme, host,
//! port), [`headers`] with [`basic_auth`], [`query`], [`form`], [`cookies`],
//! [`body`], [`multipart`] and [`custom_matcher`]; every one but the last is a
//! [`Part`]. [`multi_value`] holds the patterns for a field that may repeat.
//!
//! [`RequestPattern`] holds one of each and walks them in the three orders that
//! matter:
//!
//! - **matching** ([`RequestPattern::try_matches`], the hot path): method and URL
//!   first (the engine may have decided them already), then the rest, cheapest
//!   first, stopping at the first that fails; the custom matcher last, as its
//!   failure is a value. Parts are called directly, not through `dyn Part`, so a
//!   part the stub leaves out costs an inlined emptiness check.
//! - **closeness** ([`RequestPattern::near_miss_distance`]), as WireMock's
//!   `RequestPattern.match` weighs the parts: scheme 3, host 10, port 10, client IP 3,
//!   URL 10, method 3; only when all of these match do the path parameters, headers,
//!   query, form, cookies, body and multipart parts count, with weight 1 each. The
//!   distance is the weighted mean; a custom matcher then takes half the weight.
//! - **the report** ([`RequestPattern::report_rows`]), in the order of WireMock's
//!   `Diff.getLines`: host, port, scheme, method, URL and a blank row; then the
//!   headers, path parameters, query, form, cookies, body, multipart and custom
//!   matcher sections.
//!
//! The closeness model for one value (a pattern's score, the report's rows, the
//! pretty printers) is [`near_miss`](crate::near_miss)'s.

mod basic_auth;
mod body;
mod cookies;
mod custom_matcher;
mod form;
mod headers;
mod method;
mod multi_value;
mod multipart;
mod origin;
mod part;
mod path_params;
mod query;
mod url;

use serde_json::Value;

use crate::custom::{CustomMatch, CustomMatchers, MatchFailure};
use crate::near_miss::{ReportRow, Score};
use decoy_spec::fields::{FieldError, FieldResult, as_object, warn_unknown};
use decoy_spec::request::RequestSnapshot;

pub use method::Method;
pub use multi_value::MultiValuePattern;
pub use part::Part;
pub use url::{PathTemplate, UrlMatcher};

use body::Body;
use cookies::Cookies;
use custom_matcher::CustomMatcher;
use form::Form;
use headers::Headers;
use multipart::Multipart;
use origin::{Host, Port, Scheme};
use path_params::PathParams;
use query::Query;

/// The compiled `request` object of a mapping.
#[derive(Debug)]
pub struct RequestPattern {
    pub method: Method,
    pub url: UrlMatcher,
    /// Every other part, boxed, and `None` when the stub says nothing about any of
    /// them (most stubs: a method and a URL): ten empty parts take about 200 bytes,
    /// which 10,000 stubs would each carry. Read through [`RequestPattern::others`].
    others: Option<Box<Others>>,
}

/// The parts of a [`RequestPattern`] besides the method and the URL.
#[derive(Debug)]
struct Others {
    path_params: PathParams,
    scheme: Scheme,
    host: Host,
    port: Port,
    headers: Headers,
    query: Query,
    form: Form,
    cookies: Cookies,
    body: Body,
    multipart: Multipart,
    /// `customMatcher`: asked last, after everything else matched.
    custom: CustomMatcher,
}

impl Others {
    /// The parts, in matching's order.
    fn parts(&self) -> [&dyn Part; 10] {
        [
            &self.path_params,
            &self.scheme,
            &self.port,
            &self.host,
            &self.headers,
            &self.query,
            &self.cookies,
            &self.form,
            &self.body,
            &self.multipart,
        ]
    }

    fn constrains(&self) -> bool {
        self.parts().iter().any(|p| p.constrains()) || self.custom.get().is_some()
    }
}

/// What a stub that names none of the other parts has: the same parts, parsed from
/// an empty object, so such a stub is matched, scored and reported exactly as one
/// holding them.
static NO_OTHERS: std::sync::LazyLock<Others> = std::sync::LazyLock::new(|| {
    let empty = serde_json::Map::new();
    let url = UrlMatcher::parse(&empty, "request").expect("an empty URL matcher parses");
    let others =
        Others::parse(&empty, "request", &url, None, &mut Vec::new()).expect("empty parts parse");
    debug_assert!(!others.constrains());
    others
});

impl Others {
    fn parse(
        obj: &serde_json::Map<String, Value>,
        path: &str,
        url: &UrlMatcher,
        resolver: Option<&dyn CustomMatchers>,
        warnings: &mut Vec<FieldError>,
    ) -> FieldResult<Others> {
        let custom = CustomMatcher::parse(obj, path, resolver, warnings)?;
        Others::parse_with_custom(obj, path, url, custom)
    }

    /// In the order the parts were parsed before they were boxed (the first error
    /// found is the one reported).
    fn parse_with_custom(
        obj: &serde_json::Map<String, Value>,
        path: &str,
        url: &UrlMatcher,
        custom: CustomMatcher,
    ) -> FieldResult<Others> {
        let path_params = PathParams::parse(obj, path, url)?;
        let headers = Headers::parse(obj, path)?;
        let port = Port::parse(obj, path)?;
        let scheme = Scheme::parse(obj, path)?;
        let host = Host::parse(obj, path)?;
        let body = Body::parse(obj, path)?;
        let multipart = Multipart::parse(obj, path)?;
        Ok(Others {
            path_params,
            scheme,
            host,
            port,
            headers,
            query: Query::parse(obj, path)?,
            form: Form::parse(obj, path)?,
            cookies: Cookies::parse(obj, path)?,
            body,
            multipart,
            custom,
        })
    }
}

impl RequestPattern {
    /// A pattern outside a stub mapping (journal queries, recording filters), where
    /// `customMatcher` is refused.
    pub fn parse(v: &Value, path: &str, warnings: &mut Vec<FieldError>) -> FieldResult<Self> {
        Self::parse_with(v, path, warnings, None)
    }

    /// A stub's pattern: `custom` resolves a `customMatcher`.
    pub fn parse_with(
        v: &Value,
        path: &str,
        warnings: &mut Vec<FieldError>,
        custom: Option<&dyn CustomMatchers>,
    ) -> FieldResult<Self> {
        crate::pattern::take_lenient_warnings();
        let parsed = Self::parse_inner(v, path, warnings, custom);
        warnings.extend(crate::pattern::take_lenient_warnings());
        parsed
    }

    /// The parts in the order their errors are reported (the first one stops the
    /// stub): the custom matcher (its resolver's warnings come first), the method,
    /// the URL, and so on.
    fn parse_inner(
        v: &Value,
        path: &str,
        warnings: &mut Vec<FieldError>,
        resolver: Option<&dyn CustomMatchers>,
    ) -> FieldResult<Self> {
        let obj = as_object(v, path)?;
        let custom = CustomMatcher::parse(obj, path, resolver, warnings)?;
        let known = [
            method::FIELDS,
            url::FIELDS,
            path_params::FIELDS,
            origin::FIELDS,
            headers::FIELDS,
            query::FIELDS,
            form::FIELDS,
            cookies::FIELDS,
            basic_auth::FIELDS,
            body::FIELDS,
            multipart::FIELDS,
            custom_matcher::FIELDS,
        ]
        .concat();
        warn_unknown(obj, path, &known, &[], warnings);
        let method = Method::parse(obj, path)?;
        let url = UrlMatcher::parse(obj, path)?;
        let others = Others::parse_with_custom(obj, path, &url, custom)?;
        Ok(RequestPattern {
            method,
            url,
            others: others.constrains().then(|| Box::new(others)),
        })
    }

    /// The parts besides the method and the URL (empty ones when the stub names none).
    fn others(&self) -> &Others {
        self.others.as_deref().unwrap_or(&NO_OTHERS)
    }

    /// Does `req` match? A custom matcher that fails counts as no match; the engine
    /// uses [`RequestPattern::try_matches`] to tell the two apart.
    pub fn matches(&self, req: &RequestSnapshot) -> bool {
        self.try_matches(req).unwrap_or(false)
    }

    /// The hot path: does `req` match? Cheap checks first, the custom matcher last;
    /// its failure is returned, so the caller can stop searching.
    pub fn try_matches(&self, req: &RequestSnapshot) -> Result<bool, MatchFailure> {
        self.try_matches_with(req, false)
    }

    /// As [`RequestPattern::try_matches`], where the caller may already have decided
    /// the URL matcher (`url_checked`: the engine's index compared the whole path
    /// with a `urlPath`, or with a `url` for a request without a query).
    pub fn try_matches_with(
        &self,
        req: &RequestSnapshot,
        url_checked: bool,
    ) -> Result<bool, MatchFailure> {
        self.try_matches_checked(req, url_checked, false)
    }

    /// As [`RequestPattern::try_matches_with`], where the caller may also have
    /// decided the method (`method_checked`: it compared it already).
    pub fn try_matches_checked(
        &self,
        req: &RequestSnapshot,
        url_checked: bool,
        method_checked: bool,
    ) -> Result<bool, MatchFailure> {
        if !method_checked && !self.method.matches(req) {
            return Ok(false);
        }
        if !url_checked && !self.url.matches(req) {
            return Ok(false);
        }
        let Some(o) = self.others.as_deref() else {
            // No other part: nothing more to check (`NO_OTHERS` matches every request).
            return Ok(true);
        };
        let rest = o.path_params.matches(req)
            && o.scheme.matches(req)
            && o.port.matches(req)
            && o.host.matches(req)
            && o.headers.matches(req)
            && o.query.matches(req)
            && o.cookies.matches(req)
            && o.form.matches(req)
            && o.body.matches(req)
            && o.multipart.matches(req);
        if !rest {
            return Ok(false);
        }
        o.custom.try_matches(req, || self.path_parameters(req))
    }

    /// `urlPathTemplate` variables of `req` (none for other URL matchers).
    pub fn path_parameters(&self, req: &RequestSnapshot) -> Vec<(String, String)> {
        self.url.path_parameters(req)
    }

    /// Whether the method and the URL are all it matches on (no path parameter,
    /// scheme, host, port, header, query, form, cookie, body, multipart or custom
    /// matcher): then a caller that has decided those two has decided the match.
    pub fn only_method_and_url(&self) -> bool {
        self.others.is_none()
    }

    /// The `customMatcher` (a plugin's), if the stub has one.
    pub fn custom_matcher(&self) -> Option<&dyn CustomMatch> {
        self.others.as_deref().and_then(|o| o.custom.get())
    }

    /// Whether the URL matcher accepts `req`: all of matching for a stub that [only
    /// matches on method and URL](RequestPattern::only_method_and_url), once the
    /// method is decided.
    pub fn url_matches(&self, req: &RequestSnapshot) -> bool {
        self.url.matches(req)
    }

    /// How far `req` is from this pattern, as WireMock scores a near miss (0.0 for
    /// a match). The custom matcher is asked only when every other part matches.
    pub fn near_miss_distance(&self, req: &RequestSnapshot) -> f64 {
        // `clientIp`, which decoy's stubs do not have: always a match, still weighed.
        let client_ip = Score::EXACT;
        let o = self.others();
        let mut parts: Vec<(Score, f64)> = Vec::with_capacity(13);
        parts.extend([
            (o.scheme.score(req), 3.0),
            (o.host.score(req), 10.0),
            (o.port.score(req), 10.0),
            (client_ip, 3.0),
            (self.url.score(req), 10.0),
            (self.method.score(req), 3.0),
        ]);
        if parts.iter().all(|(s, _)| s.exact) {
            let rest: [&dyn Part; 7] = [
                &o.path_params,
                &o.headers,
                &o.query,
                &o.form,
                &o.cookies,
                &o.body,
                &o.multipart,
            ];
            parts.extend(rest.iter().map(|p| (p.score(req), 1.0)));
        }
        let weights: f64 = parts.iter().map(|(_, w)| w).sum();
        let distance = parts.iter().map(|(s, w)| s.distance * w).sum::<f64>() / weights;
        let exact = parts.iter().all(|(s, _)| s.exact);
        o.custom
            .distance(distance, exact, req, || self.path_parameters(req))
    }

    /// The report's rows for this pattern against `req`, in WireMock's order
    /// (`Diff.getLines`, less the body rows that match). The scenario row, which
    /// needs the engine's state, is the caller's to add.
    pub fn report_rows(&self, req: &RequestSnapshot) -> Vec<ReportRow> {
        let mut rows = Vec::new();
        let o = self.others();
        let head: [&dyn Part; 5] = [&o.host, &o.port, &o.scheme, &self.method, &self.url];
        for part in head {
            part.report(req, &mut rows);
        }
        rows.push(ReportRow::spacer());
        let sections: [&dyn Part; 7] = [
            &o.headers,
            &o.path_params,
            &o.query,
            &o.form,
            &o.cookies,
            &o.body,
            &o.multipart,
        ];
        for part in sections {
            part.report(req, &mut rows);
        }
        o.custom
            .report(req, || self.path_parameters(req), &mut rows);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::part::{request, row};
    use super::*;
    use serde_json::json;

    fn pattern(v: Value) -> RequestPattern {
        RequestPattern::parse(&v, "request", &mut Vec::new()).unwrap()
    }

    #[test]
    fn every_part_is_checked() {
        let r = request(
            "POST",
            "/f?q=hello%20world",
            &[
                ("cookie", "session=abc; theme=dark"),
                ("authorization", "Basic dXNlcjpwYXNz"),
                ("content-type", "application/x-www-form-urlencoded"),
                ("host", "example.com:8080"),
            ],
            "name=Ann+Lee&age=30",
        );
        let full = json!({
            "method": "POST",
            "urlPath": "/f",
            "scheme": "http",
            "host": {"equalTo": "example.com"},
            "port": 8080,
            "headers": {"Content-Type": {"contains": "form"}},
            "queryParameters": {"q": {"equalTo": "hello world"}},
            "cookies": {"session": {"equalTo": "abc"}},
            "formParameters": {"name": {"equalTo": "Ann Lee"}},
            "basicAuthCredentials": {"username": "user", "password": "pass"},
            "bodyPatterns": [{"contains": "age=30"}]
        });
        let p = pattern(full.clone());
        assert!(p.matches(&r));
        assert_eq!(p.near_miss_distance(&r), 0.0);
        assert!(!p.only_method_and_url());
        // Each part alone, changed so it fails, fails the whole.
        for (field, wrong) in [
            ("method", json!("GET")),
            ("urlPath", json!("/g")),
            ("scheme", json!("https")),
            ("host", json!({"equalTo": "example.org"})),
            ("port", json!(8081)),
            ("headers", json!({"Content-Type": {"contains": "json"}})),
            ("queryParameters", json!({"q": {"equalTo": "hello"}})),
            ("cookies", json!({"session": {"equalTo": "abd"}})),
            ("formParameters", json!({"name": {"equalTo": "Ann"}})),
            (
                "basicAuthCredentials",
                json!({"username": "user", "password": "nope"}),
            ),
            ("bodyPatterns", json!([{"contains": "age=31"}])),
        ] {
            let mut v = full.clone();
            v[field] = wrong;
            let p = pattern(v);
            assert!(!p.matches(&r), "{field}");
            assert!(p.near_miss_distance(&r) > 0.0, "{field}");
            assert!(
                p.report_rows(&r).iter().any(|row| row.message.is_some()),
                "{field}"
            );
        }
        assert!(pattern(json!({"method": "GET", "url": "/x"})).only_method_and_url());
    }

    #[test]
    fn rejects_two_url_fields_and_unknown_template_variables() {
        let e = RequestPattern::parse(
            &json!({"url": "/a", "urlPath": "/a"}),
            "request",
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.reason.contains("only one URL field"));
        let e = RequestPattern::parse(
            &json!({"urlPathTemplate": "/a/{id}", "pathParameters": {"idd": {"equalTo": "1"}}}),
            "request",
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(e.path, "request.pathParameters.idd");
    }

    #[test]
    fn unknown_request_fields_are_warnings() {
        let mut w = Vec::new();
        RequestPattern::parse(&json!({"urlPath": "/a", "hedaers": {}}), "request", &mut w).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].path, "request.hedaers");
        assert!(w[0].reason.contains("did you mean \"headers\""));
    }

    #[test]
    fn the_report_walks_the_parts_in_wiremocks_order() {
        let p = pattern(json!({
            "method": "GET", "urlPath": "/pet", "host": {"equalTo": "h"}, "port": 1,
            "scheme": "https", "headers": {"A": {"equalTo": "a"}},
            "queryParameters": {"q": {"equalTo": "1"}}, "cookies": {"c": {"equalTo": "1"}}
        }));
        let rows = p.report_rows(&request("GET", "/pet", &[], ""));
        let left: Vec<&str> = rows.iter().map(|r| r.left.as_str()).collect();
        assert_eq!(
            left,
            [
                "h",
                "1",
                "https",
                "GET",
                "[path] /pet",
                "",
                "A: a",
                "",
                "Query: q = 1",
                "",
                "Cookie: c=1",
                ""
            ]
        );
    }

    #[test]
    fn a_failing_url_leaves_headers_and_query_out_of_the_distance() {
        // WireMock scores only scheme, host, port, URL and method until they all
        // match: a query pattern the request meets does not bring a stub closer.
        let users = pattern(json!({"method": "GET", "url": "/users"}));
        let user = pattern(json!({
            "method": "GET", "urlPath": "/user",
            "queryParameters": {"pretty": {"absent": true}}
        }));
        let req = request("GET", "/corpus-compat/no-such-path", &[], "");
        let d_users = users.near_miss_distance(&req);
        let d_user = user.near_miss_distance(&req);
        let lev = |a: &str| strsim::levenshtein(a, "/corpus-compat/no-such-path") as f64 / 27.0;
        assert_eq!(d_users, 10.0 * lev("/users") / 39.0);
        assert_eq!(d_user, 10.0 * lev("/user") / 39.0);
        // Once method and URL match, each other part weighs 1 of 46.
        let req = request("GET", "/user?pretty=1", &[], "");
        assert_eq!(user.near_miss_distance(&req), 1.0 / 46.0);
    }

    /// A matcher that answers `answer`, and a resolver that knows only "known".
    #[derive(Debug)]
    struct Says(bool);

    impl crate::custom::CustomMatch for Says {
        fn name(&self) -> &str {
            "known"
        }

        fn matches(
            &self,
            _: &RequestSnapshot,
            _: &[(String, String)],
        ) -> Result<bool, MatchFailure> {
            Ok(self.0)
        }
    }

    struct Only(bool);

    impl CustomMatchers for Only {
        fn resolve(
            &self,
            v: &Value,
            path: &str,
            warnings: &mut Vec<FieldError>,
        ) -> FieldResult<std::sync::Arc<dyn crate::custom::CustomMatch>> {
            let name = v["name"].as_str().unwrap_or_default();
            if name == "known" {
                return Ok(std::sync::Arc::new(Says(self.0)));
            }
            warnings.push(FieldError::new(path, "not installed"));
            Ok(std::sync::Arc::new(crate::custom::MissingMatcher {
                name: name.to_owned(),
            }))
        }
    }

    fn with_custom(name: &str, answer: bool) -> RequestPattern {
        let v = json!({"method": "GET", "urlPath": "/todo", "customMatcher": {"name": name}});
        let mut warnings = Vec::new();
        let p =
            RequestPattern::parse_with(&v, "request", &mut warnings, Some(&Only(answer))).unwrap();
        assert_eq!(warnings.len(), usize::from(name != "known"), "{warnings:?}");
        p
    }

    #[test]
    fn a_custom_matcher_is_refused_outside_stub_mappings() {
        let e = RequestPattern::parse(
            &json!({"customMatcher": {"name": "x"}}),
            "request",
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(e.path, "request.customMatcher");
    }

    #[test]
    fn a_custom_matcher_nothing_provides_never_matches_and_gets_wiremocks_section_row() {
        let p = with_custom("state-matcher", true);
        assert!(p.custom_matcher().is_some() && !p.only_method_and_url());
        let req = request("GET", "/todo", &[], "");
        assert!(!p.matches(&req));
        // Every built-in part matches, the custom one never: (0 + 1) / 2.
        assert_eq!(p.near_miss_distance(&req), 0.5);
        let title = "[custom matcher: state-matcher]";
        assert_eq!(p.report_rows(&req).last(), Some(&row(title, title, None)));
        // Shown even when the URL already differs, as WireMock's Diff does.
        let other = request("GET", "/elsewhere", &[], "");
        assert_eq!(p.report_rows(&other).last(), Some(&row(title, title, None)));
    }

    #[test]
    fn an_installed_custom_matcher_row_says_whether_it_matched() {
        let req = request("GET", "/todo", &[], "");
        let no = with_custom("known", false);
        assert_eq!(
            no.report_rows(&req).last(),
            Some(&row(
                "[custom matcher: known]",
                " ",
                Some("custom matcher does not match")
            ))
        );
        let yes = with_custom("known", true);
        assert!(yes.matches(&req));
        assert_eq!(
            yes.report_rows(&req).last(),
            Some(&row("[custom matcher: known]", " ", None))
        );
    }
}
