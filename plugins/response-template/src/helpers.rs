//! WireMock's template helpers.
//!
//! Built into Handlebars already: `if`, `unless`, `each`, `with`, `lookup`, `eq`,
//! `ne`, `gt`, `gte`, `lt`, `lte`, `and`, `or`, `not`.
//!
//! Added here, with WireMock's names and arguments:
//! - JSON and XML: `jsonPath`, `xPath`, `soapXPath`, `parseJson`, `toJson`
//! - random: `randomValue` (`length`, `type`: ALPHANUMERIC, ALPHABETIC, NUMERIC,
//!   HEXADECIMAL, ALPHANUMERIC_AND_SYMBOLS, UUID; `uppercase`), `randomInt`
//!   (`lower`, `upper`), `randomDecimal`, `pickRandom`
//! - dates: `now`, `date`, `parseDate` (`format` in Java's SimpleDateFormat
//!   letters, or `epoch`/`unix`; `offset` such as `'3 days'` or `'-1 hours'`;
//!   `timezone` as an offset such as `+02:00` or `UTC`)
//! - numbers and lists: `math`, `size`, `array`, `range`, `join`, `contains`
//! - strings: `upper`, `lower`, `capitalize`, `trim`, `substring`, `replace`,
//!   `split`, `base64` (`decode=true`), `urlEncode` (`decode=true`),
//!   `regexExtract`, `matches`
//!
//! A helper used as `{{helper ...}}` renders a string as it is, a number or a
//! boolean as text, and a list or object as JSON; used as a subexpression
//! (`{{#each (jsonPath request.body '$.items')}}`) it gives the value itself.

use std::collections::{BTreeMap, HashMap};

use handlebars::{
    Context, Handlebars, Helper, HelperDef, HelperResult, Output, RenderContext, RenderError,
    RenderErrorReason, ScopedJson,
};
use rand::Rng;
use serde_json::{Map, Value, json};

use crate::dates;

/// A helper that needs only its arguments: positional values and `key=value` pairs.
pub type Fun = fn(&[Value], &Map<String, Value>) -> Result<Value, String>;

struct Simple(&'static str, Fun);

/// Calls helper `name`; an error names the helper, as Handlebars reports it.
pub fn run(
    name: &str,
    f: Fun,
    params: &[Value],
    hash: &Map<String, Value>,
) -> Result<Value, String> {
    f(params, hash).map_err(|e| format!("{name}: {e}"))
}

impl HelperDef for Simple {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, RenderError> {
        let params: Vec<Value> = h.params().iter().map(|p| p.value().clone()).collect();
        let hash: Map<String, Value> = h
            .hash()
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.value().clone()))
            .collect();
        run(self.0, self.1, &params, &hash)
            .map(ScopedJson::Derived)
            .map_err(|e| RenderErrorReason::Other(e).into())
    }

    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let v = self.call_inner(h, r, ctx, rc)?;
        let text = to_text(v.as_json());
        let text = if rc.is_disable_escape() {
            text
        } else {
            r.get_escape_fn()(&text)
        };
        out.write(&text)?;
        Ok(())
    }
}

/// How a value is written into the output.
pub fn to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// The helpers added here, by name.
static SIMPLE: &[(&str, Fun)] = &[
    ("jsonPath", json_path),
    ("xPath", x_path),
    ("soapXPath", soap_x_path),
    ("parseJson", parse_json),
    ("toJson", to_json),
    ("randomValue", random_value),
    ("randomInt", random_int),
    ("randomDecimal", random_decimal),
    ("pickRandom", pick_random),
    ("now", now),
    ("date", date),
    ("parseDate", parse_date),
    ("math", math),
    ("size", size),
    ("array", array),
    ("range", range),
    ("join", join),
    ("contains", contains),
    ("upper", |p, _| {
        Ok(Value::String(text(p, 0)?.to_uppercase()))
    }),
    ("lower", |p, _| {
        Ok(Value::String(text(p, 0)?.to_lowercase()))
    }),
    ("capitalize", capitalize),
    ("trim", |p, _| {
        Ok(Value::String(text(p, 0)?.trim().to_owned()))
    }),
    ("substring", substring),
    ("replace", replace),
    ("split", split),
    ("base64", base64_helper),
    ("urlEncode", url_encode),
    ("regexExtract", regex_extract),
    ("matches", regex_matches),
];

/// Helper `name`, if it is one of those added here.
pub fn simple(name: &str) -> Option<(&'static str, Fun)> {
    SIMPLE.iter().find(|(n, _)| *n == name).copied()
}

pub fn register(h: &mut Handlebars<'static>) {
    for (name, f) in SIMPLE {
        h.register_helper(name, Box::new(Simple(name, *f)));
    }
}

fn arg(p: &[Value], i: usize) -> Result<&Value, String> {
    p.get(i)
        .ok_or_else(|| format!("argument {} is missing", i + 1))
}

/// Argument `i` as text (a number or boolean is written out; null is empty).
fn text(p: &[Value], i: usize) -> Result<String, String> {
    Ok(to_text(arg(p, i)?))
}

fn opt_text(h: &Map<String, Value>, k: &str) -> Option<String> {
    h.get(k).filter(|v| !v.is_null()).map(to_text)
}

fn number(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| "not a number".to_owned()),
        Value::String(s) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("{s:?} is not a number")),
        Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        other => Err(format!("{other} is not a number")),
    }
}

fn int(v: &Value) -> Result<i64, String> {
    match v {
        Value::Number(n) if n.is_i64() => Ok(n.as_i64().unwrap_or_default()),
        other => {
            let f = number(other)?;
            if f.fract() == 0.0 && f.abs() < 9.0e15 {
                Ok(f as i64)
            } else {
                Err(format!("{f} is not a whole number"))
            }
        }
    }
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(_) => true,
    }
}

/// A JSON number from an f64: whole numbers without a fraction.
fn num_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn json_input(v: &Value) -> Result<Value, String> {
    match v {
        Value::String(s) => {
            serde_json::from_str(s).map_err(|e| format!("the input is not JSON: {e}"))
        }
        other => Ok(other.clone()),
    }
}

fn json_path(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let doc = json_input(arg(p, 0)?);
    let path = text(p, 1)?;
    let default = h.get("default").cloned();
    let doc = match (doc, &default) {
        (Ok(d), _) => d,
        (Err(_), Some(d)) => return Ok(d.clone()),
        (Err(e), None) => return Err(e),
    };
    let path = if path.starts_with('$') {
        path
    } else {
        format!("$.{}", path.trim_start_matches('.'))
    };
    let jp = serde_json_path::JsonPath::parse(&path)
        .map_err(|e| format!("bad JSONPath {path:?}: {e}"))?;
    let found = jp.query(&doc).all();
    let indefinite = path.contains("[*]") || path.contains("..") || path.contains("[?");
    Ok(match found.len() {
        0 => default.unwrap_or(Value::Null),
        1 if !indefinite => found[0].clone(),
        _ => Value::Array(found.into_iter().cloned().collect()),
    })
}

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

fn x_path(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let v = xpath_eval(&text(p, 0)?, &text(p, 1)?)?;
    Ok(if v.is_null() {
        h.get("default").cloned().unwrap_or(Value::Null)
    } else {
        v
    })
}

/// `soapXPath`: the path is relative to the SOAP body, and element names match
/// whatever namespace they are in (as WireMock's does).
fn soap_x_path(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
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

fn parse_json(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    json_input(arg(p, 0)?)
}

fn to_json(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(arg(p, 0)?.to_string()))
}

fn random_value(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let kind = opt_text(h, "type").unwrap_or_else(|| "ALPHANUMERIC".into());
    if kind == "UUID" {
        return Ok(Value::String(uuid::Uuid::new_v4().to_string()));
    }
    let length = match h.get("length") {
        Some(v) => int(v)?,
        None => 36,
    };
    if !(0..=100_000).contains(&length) {
        return Err(format!("length {length} is out of range"));
    }
    let alphabet: &[u8] = match kind.as_str() {
        "ALPHANUMERIC" => b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "ALPHABETIC" => b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "NUMERIC" => b"0123456789",
        "HEXADECIMAL" => b"0123456789abcdef",
        "ALPHANUMERIC_AND_SYMBOLS" => {
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[]^_`{|}~"
        }
        other => return Err(format!("unknown type {other:?}")),
    };
    let mut rng = rand::rng();
    let s: String = (0..length)
        .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
        .collect();
    Ok(Value::String(if truthy(h.get("uppercase")) {
        s.to_uppercase()
    } else {
        s
    }))
}

fn random_int(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let lower = h
        .get("lower")
        .map(int)
        .transpose()?
        .unwrap_or(i64::from(i32::MIN));
    let upper = h
        .get("upper")
        .map(int)
        .transpose()?
        .unwrap_or(i64::from(i32::MAX));
    if lower > upper {
        return Err(format!("lower {lower} is above upper {upper}"));
    }
    Ok(json!(rand::rng().random_range(lower..=upper)))
}

fn random_decimal(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let lower = h
        .get("lower")
        .map(number)
        .transpose()?
        .unwrap_or(f64::MIN / 2.0);
    let upper = h
        .get("upper")
        .map(number)
        .transpose()?
        .unwrap_or(f64::MAX / 2.0);
    if lower > upper {
        return Err(format!("lower {lower} is above upper {upper}"));
    }
    let f = rand::rng().random_range(lower..=upper);
    Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
}

fn pick_random(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let items: Vec<Value> = match p {
        [Value::Array(a)] => a.clone(),
        other => other.to_vec(),
    };
    if items.is_empty() {
        return Err("nothing to pick from".into());
    }
    Ok(items[rand::rng().random_range(0..items.len())].clone())
}

fn now(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    dates::render(chrono::Utc::now(), h)
}

fn date(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let d = dates::parse_value(arg(p, 0)?, None)?;
    dates::render(d, h)
}

fn parse_date(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let format = opt_text(h, "format");
    let d = dates::parse_value(arg(p, 0)?, format.as_deref())?;
    Ok(Value::String(dates::iso(d)))
}

fn math(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let a = arg(p, 0)?;
    let op = text(p, 1)?;
    let b = arg(p, 2)?;
    if let (Ok(x), Ok(y)) = (int(a), int(b))
        && op != "/"
    {
        let r = match op.as_str() {
            "+" => x.checked_add(y),
            "-" => x.checked_sub(y),
            "*" => x.checked_mul(y),
            "%" => (y != 0).then(|| x % y),
            _ => return Err(format!("unknown operator {op:?} (+ - * / %)")),
        };
        return r
            .map(|v| json!(v))
            .ok_or_else(|| format!("{x} {op} {y} has no result"));
    }
    let (x, y) = (number(a)?, number(b)?);
    let r = match op.as_str() {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "/" if y == 0.0 => return Err("division by zero".into()),
        "/" => x / y,
        "%" if y == 0.0 => return Err("division by zero".into()),
        "%" => x % y,
        _ => return Err(format!("unknown operator {op:?} (+ - * / %)")),
    };
    Ok(num_value(r))
}

fn size(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(json!(match arg(p, 0)? {
        Value::String(s) => s.chars().count(),
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        Value::Null => 0,
        other => to_text(other).chars().count(),
    }))
}

fn array(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::Array(p.to_vec()))
}

fn range(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let (a, b) = (int(arg(p, 0)?)?, int(arg(p, 1)?)?);
    if b.saturating_sub(a) > 100_000 {
        return Err("a range of more than 100,000 numbers".into());
    }
    Ok(Value::Array((a..=b).map(|i| json!(i)).collect()))
}

fn join(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    // WireMock: {{join ',' (array 1 2 3)}} or {{join ',' 'a' 'b'}}.
    let sep = text(p, 0)?;
    let items: Vec<String> = match &p[1..] {
        [Value::Array(a)] => a.iter().map(to_text).collect(),
        rest => rest.iter().map(to_text).collect(),
    };
    Ok(Value::String(items.join(&sep)))
}

fn contains(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let needle = arg(p, 1)?;
    Ok(Value::Bool(match arg(p, 0)? {
        Value::Array(a) => a
            .iter()
            .any(|v| v == needle || to_text(v) == to_text(needle)),
        Value::Object(o) => o.contains_key(&to_text(needle)),
        other => to_text(other).contains(&to_text(needle)),
    }))
}

fn capitalize(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    let fully = truthy(h.get("fully"));
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if start {
            out.extend(c.to_uppercase());
        } else if fully {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        start = c.is_whitespace();
    }
    Ok(Value::String(out))
}

fn substring(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let s: Vec<char> = text(p, 0)?.chars().collect();
    let start = int(arg(p, 1)?)?.clamp(0, s.len() as i64) as usize;
    let end = match p.get(2) {
        Some(e) => int(e)?.clamp(start as i64, s.len() as i64) as usize,
        None => s.len(),
    };
    Ok(Value::String(s[start..end].iter().collect()))
}

fn replace(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(
        text(p, 0)?.replace(&text(p, 1)?, &text(p, 2)?),
    ))
}

fn split(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    let sep = p.get(1).map(to_text).unwrap_or_else(|| ",".into());
    Ok(Value::Array(
        s.split(sep.as_str())
            .map(|x| Value::String(x.to_owned()))
            .collect(),
    ))
}

fn base64_helper(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    use base64::Engine as _;
    let s = text(p, 0)?;
    if truthy(h.get("decode")) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(s.trim()))
            .map_err(|e| format!("not base64: {e}"))?;
        Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    } else if h.get("padding").is_some_and(|v| !truthy(Some(v))) {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(s.as_bytes()),
        ))
    } else {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(s.as_bytes()),
        ))
    }
}

fn url_encode(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    if truthy(h.get("decode")) {
        let plus = s.replace('+', " ");
        Ok(Value::String(
            percent_encoding::percent_decode_str(&plus)
                .decode_utf8_lossy()
                .into_owned(),
        ))
    } else {
        // As Java's URLEncoder: space → '+', unreserved kept, the rest %XX.
        const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'_')
            .remove(b'.')
            .remove(b'*')
            .remove(b' ');
        Ok(Value::String(
            percent_encoding::utf8_percent_encode(&s, SET)
                .to_string()
                .replace(' ', "+"),
        ))
    }
}

fn regex_for(pattern: &str) -> Result<regex::Regex, String> {
    thread_local! {
        static CACHE: std::cell::RefCell<BTreeMap<String, regex::Regex>> = const { std::cell::RefCell::new(BTreeMap::new()) };
    }
    CACHE.with(|c| {
        if let Some(r) = c.borrow().get(pattern) {
            return Ok(r.clone());
        }
        let r = regex::Regex::new(pattern).map_err(|e| format!("bad regex {pattern:?}: {e}"))?;
        let mut c = c.borrow_mut();
        if c.len() > 1000 {
            c.clear();
        }
        c.insert(pattern.to_owned(), r.clone());
        Ok(r)
    })
}

/// `{{regexExtract value 'regex'}}` renders the first match; with a third argument
/// (WireMock's variable name) it gives the list of capture groups, for use as
/// `{{#with (regexExtract value '(\w+)-(\d+)' 'parts')}}{{this.[0]}}{{/with}}`.
fn regex_extract(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    let re = regex_for(&text(p, 1)?)?;
    let default = h.get("default").cloned();
    let Some(caps) = re.captures(&s) else {
        return default.ok_or_else(|| "nothing matched".to_owned());
    };
    if p.len() > 2 {
        Ok(Value::Array(
            caps.iter()
                .skip(1)
                .map(|m| m.map_or(Value::Null, |m| Value::String(m.as_str().to_owned())))
                .collect(),
        ))
    } else {
        Ok(Value::String(caps[0].to_owned()))
    }
}

fn regex_matches(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    let re = regex_for(&format!("^(?:{})$", text(p, 1)?))?;
    Ok(Value::Bool(re.is_match(&s)))
}
