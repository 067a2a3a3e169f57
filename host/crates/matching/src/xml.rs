//! `equalToXml` and `matchesXPath` (XPath 1.0, through `sxd-document` / `sxd-xpath`).
//!
//! `sxd` documents and compiled XPaths are not `Sync`, but mappings are shared between
//! worker threads. So an expected document is kept as a plain [`XNode`] tree, and an
//! XPath is validated at load time, then compiled once per worker thread into a
//! thread-local cache.

use std::cell::RefCell;
use std::collections::HashMap;

use super::limits::{Budget, COMPARE_STEP_BUDGET, MAX_XML_DEPTH};
use super::regex::Regex;
use serde_json::{Map, Value};
use sxd_document::dom;
use sxd_xpath::nodeset::Node;

use decoy_spec::fields::{FieldError, FieldResult, as_bool, as_str, join};

/// Why a text is not a document the XML matchers work on.
#[derive(Debug)]
pub enum XmlError {
    Invalid(String),
    /// Elements nest deeper than [`MAX_XML_DEPTH`].
    TooDeep,
}

impl std::fmt::Display for XmlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            XmlError::Invalid(e) => f.write_str(e),
            XmlError::TooDeep => write!(f, "elements nest deeper than {MAX_XML_DEPTH}"),
        }
    }
}

/// Parses `text`, refusing a document nested deeper than [`MAX_XML_DEPTH`]: the
/// text is scanned first, since sxd-document's parser looks namespaces up through
/// every open element (quadratic in the depth: minutes for 100,000 levels), and
/// everything after it (the [`XNode`] tree, comparisons, XPath's string values)
/// walks the tree recursively.
pub fn parse_document(text: &str) -> Result<sxd_document::Package, XmlError> {
    if nests_deeper_than(text, MAX_XML_DEPTH) {
        return Err(XmlError::TooDeep);
    }
    sxd_document::parser::parse(text).map_err(|e| XmlError::Invalid(format!("{e:?}")))
}

/// Whether elements in `text` nest deeper than `max`, by one pass over the bytes:
/// start tags (quoted attribute values skipped) open a level unless they end in
/// `/>` (which still count as one level deeper), end tags close one; comments, CDATA sections, processing instructions and
/// declarations are skipped. On malformed text it may overestimate, never
/// underestimate, and such text fails to parse anyway.
fn nests_deeper_than(text: &str, max: usize) -> bool {
    let b = text.as_bytes();
    let find = |from: usize, pat: &[u8]| -> usize {
        b[from.min(b.len())..]
            .windows(pat.len())
            .position(|w| w == pat)
            .map_or(b.len(), |p| from + p + pat.len())
    };
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &b[i..];
        if rest.starts_with(b"<!--") {
            i = find(i + 4, b"-->");
        } else if rest.starts_with(b"<![CDATA[") {
            i = find(i + 9, b"]]>");
        } else if rest.starts_with(b"<?") {
            i = find(i + 2, b"?>");
        } else if rest.starts_with(b"<!") {
            i = find(i + 2, b">");
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            i = find(i + 2, b">");
        } else {
            // A start tag: to its `>`, outside quoted attribute values.
            let mut j = i + 1;
            let mut quote = None;
            while j < b.len() {
                match (quote, b[j]) {
                    (None, b'"' | b'\'') => quote = Some(b[j]),
                    (Some(q), c) if c == q => quote = None,
                    (None, b'>') => break,
                    _ => {}
                }
                j += 1;
            }
            // An empty-element tag is as deep as a start tag, but closes at once.
            if depth + 1 > max {
                return true;
            }
            if j >= b.len() || b[j - 1] != b'/' {
                depth += 1;
            }
            i = j + 1;
        }
    }
    false
}

/// An XML tree reduced to what equality looks at: names with namespace URIs, attributes
/// as a set, and non-blank text (trimmed). Comments and processing instructions are
/// dropped, as WireMock's XMLUnit set-up does.
#[derive(Debug, Clone, PartialEq)]
pub enum XNode {
    Element {
        ns: Option<String>,
        name: String,
        attrs: Vec<(Option<String>, String, String)>,
        children: Vec<XNode>,
    },
    Text(String),
}

impl XNode {
    fn from_element(e: dom::Element<'_>) -> XNode {
        let mut attrs: Vec<_> = e
            .attributes()
            .iter()
            .map(|a| {
                (
                    a.name().namespace_uri().map(str::to_owned),
                    a.name().local_part().to_owned(),
                    a.value().to_owned(),
                )
            })
            .collect();
        attrs.sort();
        let mut children = Vec::new();
        let mut text = String::new();
        for child in e.children() {
            match child {
                dom::ChildOfElement::Element(c) => {
                    flush_text(&mut text, &mut children);
                    children.push(XNode::from_element(c));
                }
                dom::ChildOfElement::Text(t) => text.push_str(t.text()),
                _ => {}
            }
        }
        flush_text(&mut text, &mut children);
        XNode::Element {
            ns: e.name().namespace_uri().map(str::to_owned),
            name: e.name().local_part().to_owned(),
            attrs,
            children,
        }
    }

    fn root_of(pkg: &sxd_document::Package) -> Option<XNode> {
        let doc = pkg.as_document();
        doc.root().children().into_iter().find_map(|c| match c {
            dom::ChildOfRoot::Element(e) => Some(XNode::from_element(e)),
            _ => None,
        })
    }

    fn write(&self, out: &mut String) {
        match self {
            XNode::Text(t) => out.push_str(&escape(t)),
            XNode::Element {
                name,
                attrs,
                children,
                ..
            } => {
                out.push('<');
                out.push_str(name);
                for (_, k, v) in attrs {
                    out.push_str(&format!(" {k}=\"{}\"", escape(v)));
                }
                if children.is_empty() {
                    out.push_str("/>");
                } else {
                    out.push('>');
                    for c in children {
                        c.write(out);
                    }
                    out.push_str(&format!("</{name}>"));
                }
            }
        }
    }
}

fn flush_text(text: &mut String, children: &mut Vec<XNode>) {
    let t = text.trim();
    if !t.is_empty() {
        children.push(XNode::Text(t.to_owned()));
    }
    text.clear();
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[derive(Debug)]
pub struct XmlEquality {
    pub expected_text: String,
    expected: XNode,
    placeholders: bool,
    ignore_order: bool,
    regexes: HashMap<String, Regex>,
}

impl XmlEquality {
    pub fn parse(value: &Value, obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        let text = as_str(value, path)?;
        let pkg = parse_document(text).map_err(|e| {
            FieldError::new(path, format!("the expected value is not valid XML: {e}"))
        })?;
        let expected = XNode::root_of(&pkg)
            .ok_or_else(|| FieldError::new(path, "the expected XML has no root element"))?;
        let parent = path.rsplit_once('.').map(|(p, _)| p).unwrap_or("");
        let flag = |key: &str| -> FieldResult<bool> {
            obj.get(key)
                .map(|v| as_bool(v, &join(parent, key)))
                .transpose()
                .map(|b| b.unwrap_or(false))
        };
        let placeholders = flag("enablePlaceholders")?;
        let mut regexes = HashMap::new();
        if placeholders {
            collect_regexes(&expected, path, &mut regexes)?;
        }
        Ok(XmlEquality {
            expected_text: text.to_owned(),
            expected,
            placeholders,
            ignore_order: flag("ignoreOrderOfSameNode")?,
            regexes,
        })
    }

    /// Whether `actual` (parsed by [`parse_document`], so of bounded depth) equals
    /// the expected document; past [`COMPARE_STEP_BUDGET`] comparisons it does not.
    pub fn matches(&self, actual: &sxd_document::Package) -> bool {
        if crate::limits::past_deadline() {
            return false;
        }
        let budget = Budget::new(COMPARE_STEP_BUDGET);
        let equal = XNode::root_of(actual).is_some_and(|a| self.eq(&self.expected, &a, &budget));
        if budget.exhausted() {
            tracing::warn!(
                "equalToXml stopped after {COMPARE_STEP_BUDGET} node comparisons: counted as no match"
            );
            return false;
        }
        equal
    }

    fn eq(&self, e: &XNode, a: &XNode, budget: &Budget) -> bool {
        if !budget.spend(1) {
            return false;
        }
        match (e, a) {
            (XNode::Text(et), XNode::Text(at)) => self.text_eq(et, at),
            (
                XNode::Element {
                    ns: ens,
                    name: en,
                    attrs: ea,
                    children: ec,
                },
                XNode::Element {
                    ns: ans,
                    name: an,
                    attrs: aa,
                    children: ac,
                },
            ) => {
                if ens != ans || en != an || ea.len() != aa.len() || ec.len() != ac.len() {
                    return false;
                }
                let attrs_ok = ea
                    .iter()
                    .zip(aa)
                    .all(|(x, y)| x.0 == y.0 && x.1 == y.1 && self.text_eq(&x.2, &y.2));
                if !attrs_ok {
                    return false;
                }
                if self.ignore_order {
                    let mut used = vec![false; ac.len()];
                    ec.iter().all(|x| {
                        let hit = ac
                            .iter()
                            .enumerate()
                            .position(|(i, y)| !used[i] && self.eq(x, y, budget));
                        if let Some(i) = hit {
                            used[i] = true;
                        }
                        hit.is_some()
                    })
                } else {
                    ec.iter().zip(ac).all(|(x, y)| self.eq(x, y, budget))
                }
            }
            _ => false,
        }
    }

    fn text_eq(&self, expected: &str, actual: &str) -> bool {
        if self.placeholders && expected.starts_with("${xmlunit.") {
            return match expected {
                "${xmlunit.ignore}" => true,
                "${xmlunit.isNumber}" => actual.trim().parse::<f64>().is_ok(),
                other => self
                    .regexes
                    .get(other)
                    .is_some_and(|re| re.is_match(actual)),
            };
        }
        expected == actual
    }
}

fn collect_regexes(n: &XNode, path: &str, out: &mut HashMap<String, Regex>) -> FieldResult<()> {
    let mut visit = |t: &str| -> FieldResult<()> {
        if let Some(inner) = t
            .strip_prefix("${xmlunit.matchesRegex(")
            .and_then(|r| r.strip_suffix(")}"))
        {
            out.insert(t.to_owned(), super::regex::full_regex(inner, path)?);
        }
        Ok(())
    };
    match n {
        XNode::Text(t) => visit(t),
        XNode::Element {
            attrs, children, ..
        } => {
            for (_, _, v) in attrs {
                visit(v)?;
            }
            for c in children {
                collect_regexes(c, path, out)?;
            }
            Ok(())
        }
    }
}

/// A validated XPath 1.0 expression with its namespace prefixes.
#[derive(Debug)]
pub struct XPathSpec {
    pub expression: String,
    namespaces: Vec<(String, String)>,
}

thread_local! {
    static COMPILED: RefCell<HashMap<String, sxd_xpath::XPath>> = RefCell::new(HashMap::new());
}

impl XPathSpec {
    pub fn new(expression: String, namespaces: Vec<(String, String)>) -> Result<Self, String> {
        match sxd_xpath::Factory::new().build(&expression) {
            Ok(Some(_)) => Ok(XPathSpec {
                expression,
                namespaces,
            }),
            Ok(None) => Err("the XPath expression is empty".into()),
            Err(e) => Err(format!("invalid XPath {expression:?}: {e}")),
        }
    }

    /// The values the expression selects, as text; `None` when evaluation fails
    /// (an unbound namespace prefix, say). A boolean `false` selects nothing.
    pub fn evaluate(&self, pkg: &sxd_document::Package) -> Option<Vec<String>> {
        if crate::limits::past_deadline() {
            return None;
        }
        COMPILED.with(|cache| {
            let mut cache = cache.borrow_mut();
            if !cache.contains_key(&self.expression) {
                if cache.len() > 10_000 {
                    cache.clear();
                }
                let compiled = sxd_xpath::Factory::new().build(&self.expression).ok()??;
                cache.insert(self.expression.clone(), compiled);
            }
            let xpath = cache.get(&self.expression)?;
            let mut ctx = sxd_xpath::Context::new();
            for (prefix, uri) in &self.namespaces {
                ctx.set_namespace(prefix, uri);
            }
            let doc = pkg.as_document();
            let value = xpath.evaluate(&ctx, doc.root()).ok()?;
            Some(match value {
                sxd_xpath::Value::Boolean(true) => vec!["true".into()],
                sxd_xpath::Value::Boolean(false) => vec![],
                sxd_xpath::Value::Number(n) => vec![format_number(n)],
                sxd_xpath::Value::String(s) => vec![s],
                sxd_xpath::Value::Nodeset(nodes) => {
                    nodes.document_order().into_iter().map(node_text).collect()
                }
            })
        })
    }
}

fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// An element with child elements renders as XML (so `equalToXml` can be the
/// sub-pattern); anything else as its string value.
fn node_text(node: Node<'_>) -> String {
    if let Node::Element(e) = node
        && e.children()
            .iter()
            .any(|c| matches!(c, dom::ChildOfElement::Element(_)))
    {
        let mut out = String::new();
        XNode::from_element(e).write(&mut out);
        return out;
    }
    node.string_value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::{Actual, StringPattern};
    use serde_json::json;

    fn m(v: Value, actual: &str) -> bool {
        StringPattern::parse(&v, "b")
            .unwrap()
            .matches(&Actual::new(actual))
    }

    #[test]
    fn equal_to_xml_ignores_whitespace_attribute_order_and_comments() {
        let exp = r#"<a x="1" y="2"><b>hi</b><!-- c --></a>"#;
        assert!(m(
            json!({"equalToXml": exp}),
            "<a y=\"2\" x=\"1\">\n  <b> hi </b>\n</a>"
        ));
        assert!(!m(
            json!({"equalToXml": exp}),
            "<a x=\"1\" y=\"2\"><b>ho</b></a>"
        ));
        assert!(!m(json!({"equalToXml": exp}), "not xml"));
    }

    #[test]
    fn equal_to_xml_placeholders_when_enabled() {
        let v = json!({"equalToXml": "<a><id>${xmlunit.isNumber}</id><t>${xmlunit.ignore}</t></a>", "enablePlaceholders": true});
        assert!(m(v.clone(), "<a><id>42</id><t>whatever</t></a>"));
        assert!(!m(v, "<a><id>x</id><t>whatever</t></a>"));
    }

    #[test]
    fn xpath_matches_presence_and_sub_patterns() {
        let doc = "<todo-list><todo-item id=\"1\">wash</todo-item><todo-item>cook</todo-item></todo-list>";
        assert!(m(
            json!({"matchesXPath": "/todo-list[count(todo-item) = 2]"}),
            doc
        ));
        assert!(!m(
            json!({"matchesXPath": "/todo-list[count(todo-item) = 3]"}),
            doc
        ));
        assert!(m(
            json!({"matchesXPath": {"expression": "//todo-item/text()", "equalTo": "cook"}}),
            doc
        ));
        assert!(m(
            json!({"matchesXPath": {"expression": "//todo-item/@id", "equalTo": "1"}}),
            doc
        ));
    }

    #[test]
    fn xpath_uses_declared_namespaces() {
        let doc = r#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><m:Get xmlns:m="urn:x"><m:id>7</m:id></m:Get></s:Body></s:Envelope>"#;
        let v = json!({
            "matchesXPath": {"expression": "/soap:Envelope/soap:Body/x:Get/x:id/text()", "equalTo": "7"},
            "xPathNamespaces": {"soap": "http://schemas.xmlsoap.org/soap/envelope/", "x": "urn:x"}
        });
        assert!(m(v, doc));
    }

    #[test]
    fn the_depth_scan_counts_elements_not_markup_that_looks_like_them() {
        assert!(!nests_deeper_than(
            "<a><b/><c x='<d>'><!-- <e> --><![CDATA[<f>]]></c></a>",
            2
        ));
        assert!(nests_deeper_than("<a><b><c/></b></a>", 2));
        assert!(!nests_deeper_than(
            "<?xml version=\"1.0\"?><!DOCTYPE a><a><b></b><b/></a>",
            2
        ));
        assert!(nests_deeper_than(&"<a>".repeat(300), 256));
    }

    #[test]
    fn invalid_xpath_is_rejected_at_load() {
        let e = StringPattern::parse(&json!({"matchesXPath": "//a[["}), "b").unwrap_err();
        assert!(e.reason.contains("invalid XPath"), "{}", e.reason);
    }
}
