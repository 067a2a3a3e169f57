//! The XML helpers: `xPath`, `soapXPath` (over `sxd-xpath`, with the last document
//! and the compiled expressions kept per thread) and `formatXml` with its printer.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{error, format_option, text};

thread_local! {
    /// The last XML document parsed, with its text: a template usually takes several
    /// values from the same request body (Traffic Parrot's replies take two), and
    /// parsing is most of an `xPath` call's cost.
    static LAST_DOC: std::cell::RefCell<Option<(String, sxd_document::Package)>> =
        const { std::cell::RefCell::new(None) };
    /// Compiled XPath expressions, by text (a template's expressions are few and
    /// fixed; the cache is emptied if it ever holds more than 256).
    static XPATHS: std::cell::RefCell<HashMap<String, std::rc::Rc<sxd_xpath::XPath>>> =
        std::cell::RefCell::new(HashMap::new());
    /// The evaluation context: XPath's core function library, which `Context::new`
    /// builds afresh (a map of boxed functions) each time it is called.
    static XPATH_CONTEXT: sxd_xpath::Context<'static> = sxd_xpath::Context::new();
}

fn compiled_xpath(expr: &str) -> Result<std::rc::Rc<sxd_xpath::XPath>, String> {
    if let Some(x) = XPATHS.with_borrow(|m| m.get(expr).cloned()) {
        return Ok(x);
    }
    let xpath = sxd_xpath::Factory::new()
        .build(expr)
        .map_err(|e| format!("bad XPath {expr:?}: {e}"))?
        .ok_or_else(|| format!("empty XPath {expr:?}"))?;
    let xpath = std::rc::Rc::new(xpath);
    XPATHS.with_borrow_mut(|m| {
        if m.len() >= 256 {
            m.clear();
        }
        m.insert(expr.to_owned(), xpath.clone());
    });
    Ok(xpath)
}

fn xpath_eval(xml: &str, expr: &str) -> Result<Value, String> {
    let xpath = compiled_xpath(expr)?;
    LAST_DOC.with_borrow_mut(|last| {
        if last.as_ref().is_none_or(|(text, _)| text != xml) {
            let package = sxd_document::parser::parse(xml)
                .map_err(|e| format!("the input is not XML: {e:?}"))?;
            *last = Some((xml.to_owned(), package));
        }
        let Some((_, package)) = last.as_ref() else {
            return Err("no document".to_owned());
        };
        xpath_value(&xpath, expr, package)
    })
}

fn xpath_value(
    xpath: &sxd_xpath::XPath,
    expr: &str,
    package: &sxd_document::Package,
) -> Result<Value, String> {
    let doc = package.as_document();
    let v = XPATH_CONTEXT
        .with(|context| xpath.evaluate(context, doc.root()))
        .map_err(|e| format!("XPath {expr:?} failed: {e}"))?;
    Ok(match v {
        sxd_xpath::Value::Nodeset(nodes) => {
            let nodes = nodes.document_order();
            match nodes.len() {
                0 => Value::Null,
                1 => Value::String(nodes[0].string_value()),
                _ => Value::Array(
                    nodes
                        .iter()
                        .map(|n| Value::String(n.string_value()))
                        .collect(),
                ),
            }
        }
        sxd_xpath::Value::Boolean(b) => Value::Bool(b),
        sxd_xpath::Value::Number(n) => num_value(n),
        sxd_xpath::Value::String(s) => Value::String(s),
    })
}

/// A JSON number from an f64: whole numbers without a fraction.
fn num_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

pub(super) fn x_path(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let v = xpath_eval(&text(p, 0)?, &text(p, 1)?)?;
    Ok(if v.is_null() {
        h.get("default").cloned().unwrap_or(Value::Null)
    } else {
        v
    })
}

/// `soapXPath`: the path is relative to the SOAP body, and element names match
/// whatever namespace they are in (as WireMock's does).
pub(super) fn soap_x_path(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let expr = text(p, 1)?;
    let mut full = String::from("/*[local-name()='Envelope']/*[local-name()='Body']");
    for step in expr.trim_start_matches('/').split('/') {
        full.push('/');
        full.push_str(&local_name_step(step));
    }
    let v = xpath_eval(&text(p, 0)?, &full)?;
    Ok(if v.is_null() {
        h.get("default").cloned().unwrap_or(Value::Null)
    } else {
        v
    })
}

/// `ns:name[pred]` → `*[local-name()='name'][pred]`; other steps unchanged.
fn local_name_step(step: &str) -> String {
    let (head, pred) = match step.find('[') {
        Some(i) => step.split_at(i),
        None => (step, ""),
    };
    let name = head.rsplit(':').next().unwrap_or(head);
    let plain = !name.is_empty()
        && !head.contains("::")
        && !head.contains('(')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.');
    if plain && name != "." && name != ".." {
        format!("*[local-name()='{name}']{pred}")
    } else {
        step.to_owned()
    }
}

pub(super) fn format_xml(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let (body, pretty) = match format_option("formatXml", "XML", p, h) {
        Ok(x) => x,
        Err(e) => return Ok(e),
    };
    let Ok(package) = sxd_document::parser::parse(&body) else {
        return error("Input is not valid XML");
    };
    let doc = package.as_document();
    let mut out = String::new();
    for child in doc.root().children() {
        if let sxd_document::dom::ChildOfRoot::Element(e) = child {
            xml_element(e, 0, pretty, &mut out);
        }
    }
    Ok(Value::String(out))
}

fn xml_escape(s: &str, attr: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' if attr => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

fn xml_name(n: sxd_document::QName<'_>, prefix: Option<&str>) -> String {
    match prefix {
        Some(p) => format!("{p}:{}", n.local_part()),
        None => n.local_part().to_owned(),
    }
}

fn xml_element(e: sxd_document::dom::Element<'_>, level: usize, pretty: bool, out: &mut String) {
    use sxd_document::dom::ChildOfElement;
    let indent = |out: &mut String, level: usize| {
        if pretty {
            out.push_str(&"  ".repeat(level));
        }
    };
    indent(out, level);
    let name = xml_name(e.name(), e.preferred_prefix());
    out.push('<');
    out.push_str(&name);
    for ns in e.namespaces_in_scope() {
        let (prefix, uri) = (ns.prefix(), ns.uri());
        if prefix == "xml" {
            continue;
        }
        let declared_here = e.parent().and_then(|p| match p {
            sxd_document::dom::ParentOfChild::Element(pe) => pe.namespace_uri_for_prefix(prefix),
            _ => None,
        }) != Some(uri);
        if declared_here {
            out.push_str(&format!(" xmlns:{prefix}=\"{}\"", xml_escape(uri, true)));
        }
    }
    if let Some(uri) = e.default_namespace_uri() {
        out.push_str(&format!(" xmlns=\"{}\"", xml_escape(uri, true)));
    }
    for a in e.attributes() {
        out.push_str(&format!(
            " {}=\"{}\"",
            xml_name(a.name(), a.preferred_prefix()),
            xml_escape(a.value(), true)
        ));
    }
    let children: Vec<ChildOfElement<'_>> = e
        .children()
        .into_iter()
        .filter(|c| !matches!(c, ChildOfElement::Text(t) if t.text().trim().is_empty()))
        .collect();
    if children.is_empty() {
        out.push_str("/>");
    } else if children
        .iter()
        .all(|c| matches!(c, ChildOfElement::Text(_)))
    {
        out.push('>');
        for c in &children {
            if let ChildOfElement::Text(t) = c {
                out.push_str(&xml_escape(t.text(), false));
            }
        }
        out.push_str(&format!("</{name}>"));
    } else {
        out.push('>');
        if pretty {
            out.push('\n');
        }
        for c in children {
            match c {
                ChildOfElement::Element(ce) => xml_element(ce, level + 1, pretty, out),
                ChildOfElement::Text(t) => {
                    indent(out, level + 1);
                    out.push_str(&xml_escape(t.text().trim(), false));
                    if pretty {
                        out.push('\n');
                    }
                }
                ChildOfElement::Comment(c) => {
                    indent(out, level + 1);
                    out.push_str(&format!("<!--{}-->", c.text()));
                    if pretty {
                        out.push('\n');
                    }
                }
                ChildOfElement::ProcessingInstruction(_) => {}
            }
        }
        indent(out, level);
        out.push_str(&format!("</{name}>"));
    }
    if pretty {
        out.push('\n');
    }
}
