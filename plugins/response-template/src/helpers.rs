//! WireMock's template helpers.
//!
//! Built into Handlebars already: `if`, `unless`, `each`, `with`, `lookup`, `eq`,
//! `gt`, `gte`, `lt`, `lte`, `and`, `or`, `not`.
//!
//! Added here, with WireMock 3.13's names, arguments and outputs:
//! - JSON and XML: `jsonPath`, `xPath`, `soapXPath`, `parseJson`, `toJson`,
//!   `formatJson`, `formatXml`, `jsonMerge`, `jsonRemove`, `jsonArrayAdd`
//! - random: `randomValue`, `randomInt`, `randomDecimal`, `pickRandom`
//! - dates: `now`, `date`, `parseDate`, `dateFormat`
//! - numbers and lists: `math`, `size`, `array`, `arrayAdd`, `arrayRemove`, `range`,
//!   `join`, `arrayJoin`, `contains`, `isEven`, `isOdd`, `stripes`
//! - strings (Handlebars.java's StringHelpers and WireMock's): `upper`, `lower`,
//!   `capitalize`, `capitalizeFirst`, `center`, `cut`, `defaultIfEmpty`, `ljust`,
//!   `rjust`, `slugify`, `stringFormat`, `stripTags`, `abbreviate`, `wordWrap`,
//!   `yesno`, `trim`, `substring`, `replace`, `base64`, `urlEncode`, `regexExtract`,
//!   `matches`, `formData`
//! - logic and variables: `neq`, `val`, `assign`
//! - system: `hostname`, `systemValue` (denied, as WireMock denies every key unless
//!   configured otherwise)
//!
//! A helper used as `{{helper ...}}` writes its value as WireMock's Java object
//! would print (see [`Kind`]); used as a subexpression it gives the value itself.
//! Where WireMock's helper reports a problem as text, the same `[ERROR: ...]` text
//! is the value; where WireMock's throws (and the response is a 500), the helper
//! fails.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use handlebars::{
    Context, Handlebars, Helper, HelperDef, HelperResult, Output, PathAndJson, RenderContext,
    RenderError, RenderErrorReason, Renderable, ScopedJson,
};
use rand::RngExt as _;
use serde_json::{Map, Value, json};

use crate::dates;

/// A helper that needs only its arguments: positional values and `key=value` pairs.
/// `Err` fails the response (WireMock's helper throws); an inline `[ERROR: ...]` is
/// an `Ok` value.
pub type Fun = fn(&[Value], &Map<String, Value>) -> Result<Value, String>;

/// How a helper's value is written, as the Java object WireMock's helper returns
/// would print itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Java's `toString`: a list `[1, a]`, a map `{a=1, b=[1, 2]}`.
    Java,
    /// `jsonPath`'s result: an object as pretty JSON (Jackson), a list as compact
    /// JSON (json-smart).
    JsonPath,
}

/// How a helper behaves as a block (`{{#name ...}}...{{/name}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// The block is ignored; the value is written.
    No,
    /// The block is written when the value is true (never the `{{else}}`).
    When,
    /// The block when true, else the `{{else}}` part.
    IfElse,
    /// The rendered block is the first argument.
    Content,
}

/// One helper and how it is called.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub fun: Fun,
    pub kind: Kind,
    /// Takes a multi-valued request field (`request.query.tag`) as the whole list;
    /// other helpers get its first value, as Java's `toString` of it.
    pub lists: bool,
    /// May set a template variable (so it is never rendered directly).
    pub assigns: bool,
    pub block: Block,
}

const fn spec(name: &'static str, fun: Fun) -> Spec {
    Spec {
        name,
        fun,
        kind: Kind::Java,
        lists: false,
        assigns: false,
        block: Block::No,
    }
}

const fn lists(mut s: Spec) -> Spec {
    s.lists = true;
    s
}

const fn assigns(mut s: Spec) -> Spec {
    s.assigns = true;
    s
}

const fn block(mut s: Spec, b: Block) -> Spec {
    s.block = b;
    s
}

/// The helpers added here, by name.
static SIMPLE: &[Spec] = &[
    Spec {
        kind: Kind::JsonPath,
        ..spec("jsonPath", json_path)
    },
    spec("xPath", x_path),
    spec("soapXPath", soap_x_path),
    assigns(block(spec("parseJson", parse_json), Block::Content)),
    lists(spec("toJson", to_json)),
    block(spec("formatJson", format_json), Block::Content),
    block(spec("formatXml", format_xml), Block::Content),
    spec("jsonMerge", json_merge),
    spec("jsonRemove", json_remove),
    spec("jsonArrayAdd", json_array_add),
    spec("randomValue", random_value),
    spec("randomInt", random_int),
    spec("randomDecimal", random_decimal),
    lists(spec("pickRandom", pick_random)),
    spec("now", now),
    spec("date", date),
    spec("parseDate", parse_date),
    spec("dateFormat", date_format),
    spec("math", math),
    lists(spec("size", size)),
    spec("array", array),
    lists(spec("arrayAdd", array_add)),
    lists(spec("arrayRemove", array_remove)),
    spec("range", range),
    lists(spec("join", join)),
    lists(spec("arrayJoin", array_join)),
    lists(block(spec("contains", contains), Block::When)),
    block(spec("matches", regex_matches), Block::When),
    spec("isEven", is_even),
    spec("isOdd", is_odd),
    spec("stripes", stripes),
    spec("upper", |p, _| string_helper(p, |s| s.to_uppercase())),
    spec("lower", |p, _| string_helper(p, |s| s.to_lowercase())),
    spec("capitalize", capitalize),
    spec("capitalizeFirst", capitalize_first),
    spec("center", center),
    spec("cut", cut),
    spec("defaultIfEmpty", default_if_empty),
    spec("ljust", ljust),
    spec("rjust", rjust),
    spec("slugify", slugify),
    spec("stringFormat", string_format),
    spec("stripTags", strip_tags),
    spec("abbreviate", abbreviate),
    spec("wordWrap", word_wrap),
    spec("yesno", yes_no),
    block(spec("trim", trim), Block::Content),
    spec("substring", substring),
    spec("replace", replace),
    block(spec("base64", base64_helper), Block::Content),
    block(spec("urlEncode", url_encode), Block::Content),
    assigns(spec("regexExtract", regex_extract)),
    assigns(spec("formData", form_data)),
    block(spec("neq", neq), Block::IfElse),
    assigns(spec("val", val)),
    assigns(block(spec("assign", assign), Block::Content)),
    spec("hostname", hostname),
    spec("systemValue", system_value),
];

/// Whether `name` is a helper (one added here or one Handlebars has built in).
pub fn is_helper(name: &str) -> bool {
    const BUILT_IN: &[&str] = &[
        "if", "unless", "each", "with", "lookup", "raw", "log", "eq", "gt", "gte", "lt", "lte",
        "and", "or", "not", "len",
    ];
    BUILT_IN.contains(&name) || simple(name).is_some()
}

/// Helper `name`, if it is one of those added here.
pub fn simple(name: &str) -> Option<&'static Spec> {
    SIMPLE.iter().find(|s| s.name == name)
}

/// Calls helper `name`; an error names the helper, as Handlebars reports it.
pub fn run(spec: &Spec, params: &[Value], hash: &Map<String, Value>) -> Result<Value, String> {
    (spec.fun)(params, hash).map_err(|e| format!("{}: {e}", spec.name))
}

/// The name of the helper that writes a plain value (`{{path}}` is compiled as a
/// call to it, see [`crate::compile`]).
pub const VALUE: &str = "__value";

/// The name of the helper that renders a block named by a value rather than a
/// helper (`{{#request.query.q}}...{{else}}...{{/request.query.q}}` is compiled as
/// a call to it, see [`crate::compile`]).
pub const SECTION: &str = "__section";

pub fn register(h: &mut Handlebars<'static>) {
    for s in SIMPLE {
        h.register_helper(s.name, Box::new(Simple(s)));
    }
    h.register_helper(VALUE, Box::new(ValueHelper));
    h.register_helper(SECTION, Box::new(SectionHelper));
    // Handlebars.java has `neq`, not `ne`; `{{ne 1 2}}` fails in WireMock.
    h.unregister_helper("ne");
    // Handlebars.java looks a name up in the enclosing scopes when the current one
    // lacks it: `{{#each items}}{{request.method}}{{/each}}`.
    h.set_recursive_lookup(true);
}

thread_local! {
    /// Variables a helper set (`regexExtract ... 'parts'`, `assign`, `val assign=`),
    /// put into the template's context once the helper returns.
    static ASSIGNED: RefCell<Vec<(String, Value)>> = const { RefCell::new(Vec::new()) };
    /// Variables that hold multi-valued fields (`formData ... 'form'`), written as
    /// their first value.
    static LIST_VARS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn set_var(name: &str, v: Value, multi: bool) {
    if multi {
        LIST_VARS.with_borrow_mut(|l| l.push(name.to_owned()));
    }
    ASSIGNED.with_borrow_mut(|a| a.push((name.to_owned(), v)));
}

/// Forgets the variables of the last render (called before each one).
pub fn reset_vars() {
    ASSIGNED.with_borrow_mut(Vec::clear);
    LIST_VARS.with_borrow_mut(Vec::clear);
}

fn apply_vars<'rc>(ctx: &'rc Context, rc: &mut RenderContext<'_, 'rc>) -> Result<(), RenderError> {
    let vars = ASSIGNED.with_borrow_mut(std::mem::take);
    if vars.is_empty() {
        return Ok(());
    }
    let mut data = match rc.context() {
        Some(c) => c.data().clone(),
        None => ctx.data().clone(),
    };
    if let Value::Object(m) = &mut data {
        for (k, v) in vars {
            m.insert(k, v);
        }
    }
    rc.set_context(Context::wraps(data)?);
    Ok(())
}

/// Whether a template path names a multi-valued field: a query parameter, header
/// or cookie (WireMock's `ListOrSingle`), or a form field read by `formData`.
pub fn is_list_path(path: &str) -> bool {
    let path = path.strip_prefix("this.").unwrap_or(path);
    let one_more = |rest: &str| {
        !rest.is_empty()
            && if rest.starts_with('[') {
                rest.ends_with(']') && rest.matches(']').count() == 1
            } else {
                !rest.contains(['.', '['])
            }
    };
    for root in ["request.query.", "request.headers.", "request.cookies."] {
        if let Some(rest) = path.strip_prefix(root) {
            return one_more(rest);
        }
    }
    // `request.parts.<name>.headers.<name>`: a part's headers are lists too.
    if let Some(rest) = after_part_name(path) {
        return rest.strip_prefix(".headers.").is_some_and(one_more);
    }
    LIST_VARS.with_borrow(|vars| {
        vars.iter().any(|v| {
            path == v
                || path
                    .strip_prefix(v.as_str())
                    .and_then(|r| r.strip_prefix('.'))
                    .is_some_and(one_more)
        })
    })
}

/// What follows `request.parts.<name>` in `path` (`""` for the part itself).
fn after_part_name(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("request.parts.")?;
    if rest.starts_with('[') {
        rest.find(']').map(|i| &rest[i + 1..])
    } else {
        Some(rest.find('.').map_or("", |i| &rest[i..]))
    }
}

/// How WireMock prints a part (`{{request.parts.file}}`, its `toString`) or a part's
/// headers (`{{request.parts.file.headers}}`, a map of their first values), when
/// `path` names one of them.
fn part_text(path: &str, v: &Value) -> Option<String> {
    let path = path.strip_prefix("this.").unwrap_or(path);
    let Value::Object(m) = v else {
        return None;
    };
    match after_part_name(path)? {
        "" => Some(format!(
            "[name='{}', headers={}, body={}]",
            to_text(m.get("name").unwrap_or(&Value::Null)),
            java_first_values(m.get("headers").unwrap_or(&json!({}))),
            to_text(m.get("body").unwrap_or(&Value::Null)),
        )),
        ".headers" => Some(java_first_values(v)),
        _ => None,
    }
}

/// A multi-valued field as a helper that takes one value sees it (its first).
pub fn first_of(v: &Value) -> Value {
    match v {
        Value::Array(a) => a
            .first()
            .cloned()
            .unwrap_or_else(|| Value::String(String::new())),
        other => other.clone(),
    }
}

struct Simple(&'static Spec);

/// A value Handlebars did not find in the current scope, looked up from the root
/// as Handlebars.java does (`{{#each items}}{{request.method}}{{/each}}`).
fn from_root<'rc>(
    p: &PathAndJson<'rc>,
    ctx: &'rc Context,
    rc: &RenderContext<'_, 'rc>,
) -> Option<Value> {
    let path = p.relative_path()?;
    if !p.is_value_missing() || !path.contains('.') || path.starts_with(['@', '.']) {
        return None;
    }
    let root = rc.context();
    let ctx = match &root {
        Some(c) => c.as_ref(),
        None => ctx,
    };
    let mut v = ctx.data();
    for seg in path.split('.') {
        let seg = seg.trim_start_matches('[').trim_end_matches(']');
        v = match v {
            Value::Object(m) => m.get(seg)?,
            Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v.clone())
}

impl Simple {
    fn args<'rc>(
        &self,
        h: &Helper<'rc>,
        ctx: &'rc Context,
        rc: &RenderContext<'_, 'rc>,
    ) -> (Vec<Value>, Map<String, Value>) {
        let conv = |p: &PathAndJson<'rc>| {
            let found = from_root(p, ctx, rc);
            let v = found.as_ref().unwrap_or(p.value());
            let path = p.relative_path();
            if !self.0.lists && v.is_array() && path.is_some_and(|p| is_list_path(p)) {
                first_of(v)
            } else {
                v.clone()
            }
        };
        let params = h.params().iter().map(conv).collect();
        let hash = h
            .hash()
            .iter()
            .map(|(k, v)| ((*k).to_owned(), conv(v)))
            .collect();
        (params, hash)
    }
}

impl HelperDef for Simple {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, RenderError> {
        let (params, hash) = self.args(h, ctx, rc);
        let v = run(self.0, &params, &hash).map_err(RenderErrorReason::Other)?;
        apply_vars(ctx, rc)?;
        Ok(ScopedJson::Derived(v))
    }

    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let (mut params, hash) = self.args(h, ctx, rc);
        if self.0.name == "assign" {
            // `{{#assign 'name'}}value{{/assign}}`; inline, the value is empty.
            let body = match h.template() {
                Some(t) => t.renders(r, ctx, rc)?,
                None => String::new(),
            };
            params.truncate(1);
            params.push(Value::String(body));
        } else if let (Some(t), Block::Content) = (h.template(), self.0.block) {
            params.insert(0, Value::String(t.renders(r, ctx, rc)?));
        }
        let v = run(self.0, &params, &hash).map_err(RenderErrorReason::Other)?;
        apply_vars(ctx, rc)?;
        match (h.template(), self.0.block) {
            (Some(t), Block::When) => {
                if truthy(Some(&v)) {
                    t.render(r, ctx, rc, out)?;
                }
            }
            (Some(t), Block::IfElse) => {
                if truthy(Some(&v)) {
                    t.render(r, ctx, rc, out)?;
                } else if let Some(e) = h.inverse() {
                    e.render(r, ctx, rc, out)?;
                }
            }
            _ => out.write(&text_of(self.0.kind, &v))?,
        }
        Ok(())
    }
}

/// Writes a plain value, `{{path}}`, as WireMock does: a multi-valued field as its
/// first value, a list or map as Java prints it.
struct ValueHelper;

impl HelperDef for ValueHelper {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let Some(p) = h.param(0) else {
            return Ok(());
        };
        let found = from_root(p, ctx, rc);
        let v = found.as_ref().unwrap_or(p.value());
        // Inside `{{#with request.headers}}`, `{{x-trace}}` is a header too.
        let base = rc
            .block()
            .map(|b| b.base_path().join("."))
            .unwrap_or_default();
        let listed = p.relative_path().is_some_and(|p| {
            is_list_path(p) || (!base.is_empty() && is_list_path(&format!("{base}.{p}")))
        });
        let part = p.relative_path().and_then(|p| part_text(p, v));
        let text = if let Some(part) = part {
            part
        } else if listed && v.is_array() {
            to_text(&first_of(v))
        } else if listed && v.is_object() {
            java_first_values(v)
        } else {
            to_text(v)
        };
        out.write(&text)?;
        Ok(())
    }
}

/// A block named by a value, as Handlebars.java renders a block whose name is no
/// helper (a Mustache section): once per element of a non-empty list, once with the
/// value as the context when it is truthy, else its `{{else}}` part. Falsy, as
/// Handlebars.java's `isEmpty`: missing, null, false, `""`, an empty list, zero.
struct SectionHelper;

impl HelperDef for SectionHelper {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let Some(p) = h.param(0) else {
            return Ok(());
        };
        let value = p.value();
        let truthy = match value {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(_) => true,
        };
        if !truthy {
            return match h.inverse() {
                Some(t) => t.render(r, ctx, rc, out),
                None => Ok(()),
            };
        }
        let Some(template) = h.template() else {
            return Ok(());
        };
        let scopes: Vec<(Option<usize>, Value)> = match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (Some(i), v.clone()))
                .collect(),
            other => vec![(None, other.clone())],
        };
        for (index, scope) in scopes {
            let mut block = handlebars::BlockContext::new();
            match (p.context_path(), index) {
                (Some(path), Some(i)) => {
                    let mut path = path.clone();
                    path.push(i.to_string());
                    *block.base_path_mut() = path;
                }
                (Some(path), None) => *block.base_path_mut() = path.clone(),
                (None, _) => block.set_base_value(scope),
            }
            rc.push_block(block);
            let rendered = template.render(r, ctx, rc, out);
            rc.pop_block();
            rendered?;
        }
        Ok(())
    }
}

/// How a helper of `kind` writes `v`.
pub fn text_of(kind: Kind, v: &Value) -> String {
    match (kind, v) {
        (Kind::JsonPath, Value::Object(_)) => jackson_pretty(v),
        (Kind::JsonPath, Value::Array(_)) => json_smart(v),
        _ => to_text(v),
    }
}

/// How a value is written into the output: as Java's `String.valueOf` would write
/// the object WireMock holds (null is empty at the top level).
pub fn to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => java_string(other),
    }
}

/// Java's `toString` of the value as a Java object (`List`, `Map`, `Double`...).
pub fn java_string(v: &Value) -> String {
    let mut out = String::new();
    java_into(v, &mut out);
    out
}

fn java_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_text(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                java_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push('=');
                java_into(x, out);
            }
            out.push('}');
        }
    }
}

/// A JSON number as Java prints it: integers as they are, doubles as
/// `Double.toString` (`5.0`, `0.3`, `1.0E20`).
pub fn number_text(n: &serde_json::Number) -> String {
    decoy_jsonfmt::number(n, decoy_jsonfmt::Numbers::Double)
}

pub use decoy_jsonfmt::java_double;

/// Jackson's default pretty printer, as WireMock's `Json.write` (null members left
/// out): `{\n  "a" : 1,\n  "b" : [ 1, 2 ]\n}`.
pub fn jackson_pretty(v: &Value) -> String {
    decoy_jsonfmt::Pretty::OBJECT.print(v)
}

/// json-smart's compact JSON (how `jsonPath` writes a list): `/` is escaped.
pub fn json_smart(v: &Value) -> String {
    fn into(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                out.push('{');
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    json_string_into(k, true, out);
                    out.push(':');
                    into(x, out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    into(x, out);
                }
                out.push(']');
            }
            Value::String(s) => json_string_into(s, true, out),
            Value::Number(n) => out.push_str(&number_text(n)),
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    into(v, &mut out);
    out
}

fn json_string_into(s: &str, slash: bool, out: &mut String) {
    decoy_jsonfmt::quote_into(s, slash, out)
}

/// An inline error, as WireMock writes it in place of the helper's value.
fn error(msg: impl std::fmt::Display) -> Result<Value, String> {
    Ok(Value::String(format!("[ERROR: {msg}]")))
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

/// WireMock's `coerceToInt`: a number, or text that must be an integer (else the
/// helper throws).
fn coerce_int(v: &Value) -> Result<Option<i64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))),
        Value::String(s) => s
            .parse::<i32>()
            .map(|i| Some(i64::from(i)))
            .map_err(|_| format!("For input string: \"{s}\"")),
        _ => Ok(None),
    }
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty() && s != "false",
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    }
}

fn is_true(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

/// Jayway's functions, at the end of a path: `$.items.length()`.
const PATH_FUNCTIONS: &[&str] = &[
    "length", "size", "min", "max", "sum", "avg", "stddev", "first", "last", "keys",
];

fn json_path(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let input = arg(p, 0).unwrap_or(&Value::Null);
    if input.is_null() || input.as_str() == Some("") {
        return Ok(Value::String(String::new()));
    }
    let Some(path) = p.get(1).filter(|v| !v.is_null()).map(to_text) else {
        return error("The JSONPath cannot be empty");
    };
    let default = h.get("default").cloned();
    let doc = match input {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(d) => d,
            // json-smart, which WireMock's JSONPath reads with, takes text that does
            // not open an object or a list as a plain string.
            Err(_) if !s.trim_start().starts_with(['{', '[']) => Value::String(s.clone()),
            Err(_) => return error(format!("{s} is not valid JSON")),
        },
        other => other.clone(),
    };
    let mut expr = path.trim().to_owned();
    if !expr.starts_with('$') {
        expr = format!("$.{}", expr.trim_start_matches('.'));
    }
    let mut function = None;
    if let Some(base) = expr.strip_suffix("()")
        && let Some((head, name)) = base.rsplit_once('.')
        && PATH_FUNCTIONS.contains(&name)
    {
        function = Some(name.to_owned());
        expr = head.to_owned();
    }
    // Jayway's operators RFC 9535 lacks become function calls and `match()`, as in
    // decoy's matchers (`[?(@.size in ['S', 'M'])]`, `[?(@.name =~ /a.*/i)]`); a regex
    // the `regex` crate cannot run is a bad path, as a regex Java cannot compile is
    // in WireMock.
    let expr = match decoy_jsonpath::rewrite(&expr) {
        Ok(r)
            if r.regexes
                .iter()
                .all(|re| regex::Regex::new(&format!("(?R)^({re})$")).is_ok()) =>
        {
            r.expression
        }
        _ => return error(format!("{path} is not a valid JSONPath expression")),
    };
    let Ok(jp) = serde_json_path::JsonPath::parse(&expr) else {
        return error(format!("{path} is not a valid JSONPath expression"));
    };
    let found = jp.query(&doc).all();
    let indefinite = expr.contains("[*]")
        || expr.contains("..")
        || expr.contains("[?")
        || expr.contains(':')
        || expr.contains(',')
        || expr.contains(".*");
    let value = if indefinite {
        Some(Value::Array(found.into_iter().cloned().collect()))
    } else {
        found.first().map(|v| (*v).clone())
    };
    let value = match (function.as_deref(), value) {
        (Some(f), Some(v)) => path_function(f, &v),
        (None, v) => v,
        (Some(_), None) => None,
    };
    Ok(match value {
        Some(Value::Null) | None => default.unwrap_or_else(|| Value::String(String::new())),
        Some(v) => v,
    })
}

fn path_function(f: &str, v: &Value) -> Option<Value> {
    let nums = || -> Option<Vec<f64>> {
        match v {
            Value::Array(a) if !a.is_empty() => a.iter().map(Value::as_f64).collect(),
            _ => None,
        }
    };
    let double = |x: f64| serde_json::Number::from_f64(x).map(Value::Number);
    match f {
        "length" | "size" => match v {
            Value::Array(a) => Some(json!(a.len())),
            Value::Object(o) => Some(json!(o.len())),
            _ => None,
        },
        "min" => double(nums()?.into_iter().fold(f64::INFINITY, f64::min)),
        "max" => double(nums()?.into_iter().fold(f64::NEG_INFINITY, f64::max)),
        "sum" => double(nums()?.into_iter().sum()),
        "avg" => {
            let n = nums()?;
            double(n.iter().sum::<f64>() / n.len() as f64)
        }
        "stddev" => {
            let n = nums()?;
            let len = n.len() as f64;
            let mean = n.iter().sum::<f64>() / len;
            let var = n.iter().map(|x| x * x).sum::<f64>() / len - mean * mean;
            double(var.sqrt())
        }
        "first" => v.as_array().and_then(|a| a.first().cloned()),
        "last" => v.as_array().and_then(|a| a.last().cloned()),
        "keys" => v
            .as_object()
            .map(|o| Value::Array(o.keys().map(|k| json!(k)).collect())),
        _ => None,
    }
}

fn parse_json(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let Some(input) = p.first() else {
        return error("Missing required JSON string parameter");
    };
    if input.is_null() {
        return Ok(json!({}));
    }
    let text = to_text(input);
    let text = text.trim();
    let result = if text
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        == "{}"
        || text.is_empty()
    {
        json!({})
    } else {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if !(v.is_object() || v.is_array()) {
            return Err(format!("{text} is not a JSON object"));
        }
        v
    };
    match p.get(1) {
        Some(name) => {
            set_var(&to_text(name), result, false);
            Ok(Value::Null)
        }
        None => Ok(result),
    }
}

fn to_json(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(match p.first() {
        None | Some(Value::Null) => String::new(),
        Some(v) => jackson_pretty(v),
    }))
}

/// `format=` of `formatJson`/`formatXml`: pretty (default) or compact.
fn format_option(
    name: &str,
    what: &str,
    p: &[Value],
    h: &Map<String, Value>,
) -> Result<(String, bool), Value> {
    let body = match p.first() {
        Some(Value::String(s)) => s.trim().to_owned(),
        _ => String::new(),
    };
    let fail = |m: String| Value::String(format!("[ERROR: {m}]"));
    if body.is_empty() {
        return Err(fail(format!(
            "{name} should take a block of {what} to format or a single parameter of type String"
        )));
    }
    match h.get("format").map(to_text).as_deref() {
        None | Some("pretty") => Ok((body, true)),
        Some("compact") => Ok((body, false)),
        Some(other) => Err(fail(format!(
            "{name}: format [{other}] should be one of [pretty, compact]"
        ))),
    }
}

fn format_json(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let (body, pretty) = match format_option("formatJson", "JSON", p, h) {
        Ok(x) => x,
        Err(e) => return Ok(e),
    };
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("not JSON: {e}"))?;
    Ok(Value::String(if pretty {
        decoy_jsonfmt::Pretty::TREE.print(&v)
    } else {
        v.to_string()
    }))
}

fn format_xml(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
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

fn json_merge(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(base_text)) = p.first() else {
        return error("Base JSON parameter must be a string");
    };
    let Ok(mut base) = serde_json::from_str::<Value>(base_text) else {
        return error(format!("Base JSON is not valid JSON ('{base_text}')"));
    };
    if !base.is_object() {
        return error(format!("Base JSON is not a JSON object ('{base_text}')"));
    }
    let Some(Value::String(other_text)) = p.get(1) else {
        return error("JSON to merge must be a string");
    };
    let Ok(other) = serde_json::from_str::<Value>(other_text) else {
        return error(format!("JSON to merge is not valid JSON ('{other_text}')"));
    };
    if !other.is_object() {
        return error(format!(
            "JSON to merge is not a JSON object ('{other_text}')"
        ));
    }
    fn merge(base: &mut Map<String, Value>, other: &Map<String, Value>, remove_nulls: bool) {
        for (k, v) in other {
            match (base.get_mut(k), v) {
                (Some(Value::Object(b)), Value::Object(o)) => merge(b, o, remove_nulls),
                (_, Value::Null) if remove_nulls => {
                    base.shift_remove(k);
                }
                _ => {
                    base.insert(k.clone(), v.clone());
                }
            }
        }
    }
    if let (Value::Object(b), Value::Object(o)) = (&mut base, &other) {
        merge(b, o, is_true(h.get("removeNulls")));
    }
    Ok(Value::String(base.to_string()))
}

fn json_remove(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(input)) = p.first() else {
        return error("Input JSON must be a string");
    };
    if input == "null" {
        return Ok(Value::String(input.clone()));
    }
    if p.len() != 2 {
        return error("A single JSONPath expression parameter must be supplied");
    }
    let Value::String(path) = &p[1] else {
        return error("JSONPath parameter must be a string");
    };
    let Ok(mut doc) = serde_json::from_str::<Value>(input) else {
        return error(format!("Input JSON string is not valid JSON ('{input}')"));
    };
    let bad = || {
        error(format!(
            "JSONPath parameter is not a valid JSONPath expression ('{path}')"
        ))
    };
    let Ok(jp) = serde_json_path::JsonPath::parse(path) else {
        return bad();
    };
    let pointers: Vec<String> = jp
        .query_located(&doc)
        .locations()
        .map(|l| l.to_json_pointer())
        .collect();
    if pointers.iter().any(String::is_empty) {
        return error(format!(
            "Delete operation cannot be applied to JSONPath expression ('{path}')"
        ));
    }
    // Last first, so earlier pointers into the same list stay right.
    for ptr in pointers.iter().rev() {
        let (parent, key) = ptr.rsplit_once('/').unwrap_or(("", ptr));
        let key = key.replace("~1", "/").replace("~0", "~");
        match doc.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.shift_remove(&key);
            }
            Some(Value::Array(a)) => {
                if let Ok(i) = key.parse::<usize>()
                    && i < a.len()
                {
                    a.remove(i);
                }
            }
            _ => {}
        }
    }
    Ok(Value::String(doc.to_string()))
}

fn json_array_add(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(input)) = p.first() else {
        return error("Base JSON must be a string");
    };
    let Ok(mut root) = serde_json::from_str::<Value>(input) else {
        return error(format!("Base JSON is not valid JSON ('{input}')"));
    };
    let path = match h.get("jsonPath") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return error("jsonPath option must be a string"),
    };
    let pointer = match &path {
        None => Some(String::new()),
        Some(s) => {
            let Ok(jp) = serde_json_path::JsonPath::parse(s) else {
                return error(format!(
                    "jsonPath option is not valid JSONPath expression ('{s}')"
                ));
            };
            jp.query_located(&root)
                .locations()
                .next()
                .map(|l| l.to_json_pointer())
        }
    };
    let target_ok = pointer
        .as_deref()
        .and_then(|ptr| root.pointer(ptr))
        .is_some_and(Value::is_array);
    if !target_ok {
        let detail = match &path {
            None => format!("'{input}'"),
            Some(s) => format!("root: '{input}', jsonPath: '{s}'"),
        };
        return error(format!("Target JSON is not a JSON array ({detail})"));
    }
    let Some(Value::String(item)) = p.get(1) else {
        return error("Item-to-add JSON must be a string");
    };
    let Ok(item_value) = serde_json::from_str::<Value>(item) else {
        return error(format!("Item-to-add JSON is not valid JSON ('{item}')"));
    };
    let flatten = match h.get("flatten") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return error("flatten option must be a boolean"),
    };
    let max_items = match h.get("maxItems") {
        None => None,
        Some(Value::Number(n)) if n.is_i64() => {
            let m = n.as_i64().unwrap_or_default();
            if m < 0 {
                return error("maxItems option integer must be positive");
            }
            Some(m as usize)
        }
        Some(_) => return error("maxItems option must be an integer"),
    };
    if let Some(Value::Array(list)) = pointer.as_deref().and_then(|ptr| root.pointer_mut(ptr)) {
        match item_value {
            Value::Array(items) if flatten => list.extend(items),
            v => list.push(v),
        }
        if let Some(m) = max_items
            && list.len() > m
        {
            list.drain(..list.len() - m);
        }
    }
    Ok(Value::String(root.to_string()))
}

fn pick_random(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let mut items: Vec<Value> = match p {
        [] | [Value::Null, ..] => {
            return error(
                "Must specify either a single list argument or a set of single value arguments.",
            );
        }
        [Value::Array(a), ..] => a.clone(),
        other => other.to_vec(),
    };
    if items.is_empty() {
        return Err("bound must be positive".into());
    }
    let mut rng = rand::rng();
    if let Some(count) = h.get("count").and_then(Value::as_i64).filter(|c| *c > 0) {
        let n = items.len().min(count as usize);
        for i in 0..n {
            let j = rng.random_range(i..items.len());
            items.swap(i, j);
        }
        items.truncate(n);
        return Ok(Value::Array(items));
    }
    Ok(items[rng.random_range(0..items.len())].clone())
}

fn date_format(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let d = dates::parse_value(arg(p, 0)?, None)?;
    let mut style = date_style(h);
    if let Some(f) = p.get(1) {
        style.format = Some(to_text(f));
    }
    match style.format.as_deref() {
        None | Some("medium") => style.format = Some("MMM d, yyyy, h:mm:ss a".into()),
        Some("short") => style.format = Some("M/d/yy, h:mm a".into()),
        _ => {}
    }
    dates::render(d, &style)
}

/// The `offset`, `timezone` and `format` of a date helper's hash, as text (a
/// missing or null one is `None`).
fn date_style(h: &Map<String, Value>) -> dates::Style {
    let text = |key| h.get(key).filter(|v| !v.is_null()).map(to_text);
    dates::Style {
        offset: text("offset"),
        timezone: text("timezone"),
        format: text("format"),
    }
}

/// A decimal number as Java's `BigDecimal`: digits and a scale.
#[derive(Debug, Clone, Copy)]
struct Decimal {
    digits: i128,
    scale: u32,
}

impl Decimal {
    fn parse(s: &str) -> Option<Decimal> {
        let s = s.trim();
        let (mantissa, exp) = match s.split_once(['e', 'E']) {
            Some((m, e)) => (m, e.parse::<i32>().ok()?),
            None => (s, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if int.trim_start_matches(['-', '+']).is_empty() && frac.is_empty() {
            return None;
        }
        if !frac.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let digits: i128 = format!("{int}{frac}").parse().ok()?;
        let scale = frac.len() as i32 - exp;
        if scale < 0 {
            Some(Decimal {
                digits: digits.checked_mul(10i128.checked_pow((-scale) as u32)?)?,
                scale: 0,
            })
        } else {
            Some(Decimal {
                digits,
                scale: scale as u32,
            })
        }
    }

    /// WireMock's `coerceToBigDecimal`: a number, else its text, else 0.
    fn of(v: &Value) -> Decimal {
        let text = match v {
            Value::Number(n) => number_text(n),
            other => to_text(other),
        };
        Decimal::parse(&text).unwrap_or(Decimal {
            digits: 0,
            scale: 0,
        })
    }

    fn rescale(self, scale: u32) -> Option<i128> {
        self.digits
            .checked_mul(10i128.checked_pow(scale - self.scale)?)
    }

    fn value(self) -> Value {
        if self.scale == 0 {
            return json!(self.digits as i64);
        }
        let f = self.digits as f64 / 10f64.powi(self.scale as i32);
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn math(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    if p.len() != 3 {
        return error(
            "All maths functions require two operands and an operator as parameters e.g. 3 '+' 2",
        );
    }
    let (a, op, b) = (Decimal::of(&p[0]), to_text(&p[1]), Decimal::of(&p[2]));
    let overflow = || "the result is out of range".to_owned();
    let scale = a.scale.max(b.scale);
    let r = match op.as_str() {
        "+" | "-" => {
            let (x, y) = (
                a.rescale(scale).ok_or_else(overflow)?,
                b.rescale(scale).ok_or_else(overflow)?,
            );
            let digits = if op == "+" {
                x.checked_add(y)
            } else {
                x.checked_sub(y)
            };
            Decimal {
                digits: digits.ok_or_else(overflow)?,
                scale,
            }
        }
        "*" | "x" => Decimal {
            digits: a.digits.checked_mul(b.digits).ok_or_else(overflow)?,
            scale: a.scale + b.scale,
        },
        "/" => {
            if b.digits == 0 {
                return Err("/ by zero".into());
            }
            // BigDecimal.divide(right, HALF_UP): the left operand's scale.
            let num = a
                .digits
                .checked_mul(10i128.checked_pow(b.scale).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            let (q, rem) = (num / b.digits, num % b.digits);
            let q = if rem.abs() * 2 >= b.digits.abs() {
                q + if (num < 0) != (b.digits < 0) { -1 } else { 1 }
            } else {
                q
            };
            Decimal {
                digits: q,
                scale: a.scale,
            }
        }
        "%" => {
            if b.digits == 0 {
                return Err("Division by zero".into());
            }
            let (x, y) = (
                a.rescale(scale).ok_or_else(overflow)?,
                b.rescale(scale).ok_or_else(overflow)?,
            );
            Decimal {
                digits: x % y,
                scale,
            }
        }
        _ => return error(format!("{op} is not a valid mathematical operator")),
    };
    Ok(r.value())
}

fn size(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(match p.first() {
        Some(Value::String(s)) => json!(s.encode_utf16().count()),
        Some(Value::Array(a)) => json!(a.len()),
        Some(Value::Object(o)) => json!(o.len()),
        Some(Value::Null) | None => return Err("null has no size".into()),
        _ => Value::Null,
    })
}

fn array(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::Array(p.to_vec()))
}

/// A JSON number from an f64: whole numbers without a fraction.
fn num_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// `position=` of `arrayAdd`/`arrayRemove`: `Ok(None)` is the end.
fn position(h: &Map<String, Value>) -> Result<Option<i64>, ()> {
    match h.get("position") {
        None => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or(()),
        Some(v) => {
            let s = to_text(v);
            if s.eq_ignore_ascii_case("start") {
                Ok(Some(0))
            } else if s.eq_ignore_ascii_case("end") {
                Ok(None)
            } else {
                s.parse::<i32>().map(|i| Some(i64::from(i))).map_err(|_| ())
            }
        }
    }
}

const POSITION_RANGE: &str =
    "position must be greater than or equal to 0 and less than or equal to the size of the list";

fn list_arg(v: Option<&Value>) -> Result<Vec<Value>, String> {
    match v {
        Some(Value::Array(a)) => Ok(a.clone()),
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(other) => Err(format!("{} is not a list", to_text(other))),
    }
}

fn array_add(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    if p.first().is_none_or(Value::is_null) {
        return Ok(json!([]));
    }
    let mut list = list_arg(p.first())?;
    let Some(item) = p.get(1) else {
        return error("Missing required parameter: additional value to add to list");
    };
    match position(h) {
        Err(()) => error("position must be 'start', 'end' or an integer"),
        Ok(None) => {
            list.push(item.clone());
            Ok(Value::Array(list))
        }
        Ok(Some(i)) if i < 0 || i as usize > list.len() => error(POSITION_RANGE),
        Ok(Some(i)) => {
            list.insert(i as usize, item.clone());
            Ok(Value::Array(list))
        }
    }
}

fn array_remove(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let mut list = list_arg(p.first())?;
    let at = match position(h) {
        Err(()) => return error("position must be 'start', 'end' or an integer"),
        Ok(Some(i)) if i < 0 || i as usize > list.len() => return error(POSITION_RANGE),
        Ok(Some(i)) => i as usize,
        Ok(None) => list.len().wrapping_sub(1),
    };
    if at >= list.len() {
        return Err(format!(
            "Index {at} out of bounds for length {}",
            list.len()
        ));
    }
    list.remove(at);
    Ok(Value::Array(list))
}

fn range(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let lower = p.first().map(coerce_int).transpose()?.flatten();
    let upper = p.get(1).map(coerce_int).transpose()?.flatten();
    let (Some(a), Some(b)) = (lower, upper) else {
        return error(
            "The range helper requires both lower and upper bounds as integer parameters",
        );
    };
    if b < a - 1 {
        return Err(format!("{}", b - a + 1));
    }
    if b - a > 100_000 {
        return Err("a range of more than 100,000 numbers".into());
    }
    Ok(Value::Array((a..=b).map(|i| json!(i)).collect()))
}

/// Handlebars.java's `join`: the last argument is the separator; lists are joined
/// item by item.
fn join(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some((sep, items)) = p.split_last() else {
        return Ok(Value::String(String::new()));
    };
    if items.is_empty() {
        return Ok(Value::String(to_text(sep)));
    }
    let mut parts = Vec::new();
    for i in items {
        match i {
            Value::Array(a) => parts.extend(a.iter().map(to_text)),
            other => parts.push(to_text(other)),
        }
    }
    let joined = parts.join(&to_text(sep));
    let prefix = opt_text(h, "prefix").unwrap_or_default();
    let suffix = opt_text(h, "suffix").unwrap_or_default();
    Ok(Value::String(format!("{prefix}{joined}{suffix}")))
}

fn array_join(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(sep)) = p.first() else {
        return error("Separator parameter must be a String");
    };
    let items: Vec<Value> = match p.get(1) {
        None | Some(Value::Null) => return error("The parameter must be list"),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => p[1..].to_vec(),
    };
    if items.is_empty() {
        return Ok(Value::String(String::new()));
    }
    let prefix = opt_text(h, "prefix").unwrap_or_default();
    let suffix = opt_text(h, "suffix").unwrap_or_default();
    let joined: Vec<String> = items.iter().map(java_string).collect();
    Ok(Value::String(format!(
        "{prefix}{}{suffix}",
        joined.join(sep)
    )))
}

fn contains(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    if p.len() < 2 {
        return error(
            "You must specify the string or array to be matched and the regular expression",
        );
    }
    let needle = match &p[1] {
        Value::Null => return Ok(Value::Bool(false)),
        Value::String(s) => s.clone(),
        other => {
            return Err(format!(
                "class of {} cannot be cast to class java.lang.String",
                to_text(other)
            ));
        }
    };
    Ok(Value::Bool(match &p[0] {
        Value::Null => false,
        Value::Array(a) => a.iter().any(|v| v.as_str() == Some(needle.as_str())),
        other => to_text(other).contains(&needle),
    }))
}

fn regex_matches(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    if p.len() < 2 {
        return error("You must specify the string to be matched and the regular expression");
    }
    let s = to_text(&p[0]);
    let re = regex_for(&format!("^(?:{})$", text(p, 1)?))?;
    Ok(Value::Bool(re.is_match(&s)))
}

fn parity(p: &[Value], even: bool, word: &str) -> Result<Value, String> {
    let n = int(arg(p, 0)?)?;
    Ok(Value::String(if (n % 2 == 0) == even {
        p.get(1).map_or_else(|| word.to_owned(), to_text)
    } else {
        String::new()
    }))
}

fn is_even(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    parity(p, true, "even")
}

fn is_odd(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    parity(p, false, "odd")
}

fn stripes(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let n = int(arg(p, 0)?)?;
    Ok(Value::String(if n % 2 == 0 {
        text(p, 1)?
    } else {
        text(p, 2)?
    }))
}

/// A Handlebars.java string helper: null renders nothing.
fn string_helper(p: &[Value], f: impl Fn(&str) -> String) -> Result<Value, String> {
    match p.first() {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(v) => Ok(Value::String(f(&to_text(v)))),
    }
}

fn capitalize_first(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    string_helper(p, |s| {
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    })
}

fn pad_char(h: &Map<String, Value>) -> String {
    opt_text(h, "pad").unwrap_or_else(|| " ".into())
}

fn size_opt(p: &[Value], h: &Map<String, Value>) -> Result<usize, String> {
    let v = h.get("size").or_else(|| p.get(1));
    Ok(v.map(int).transpose()?.unwrap_or(0).max(0) as usize)
}

fn repeat_pad(pad: &str, n: usize) -> String {
    pad.chars().cycle().take(n).collect()
}

fn center(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let size = size_opt(p, h)?;
    let pad = pad_char(h);
    string_helper(p, |s| {
        let len = s.chars().count();
        if size <= len || pad.is_empty() {
            return s.to_owned();
        }
        let left = (size - len) / 2;
        format!(
            "{}{s}{}",
            repeat_pad(&pad, left),
            repeat_pad(&pad, size - len - left)
        )
    })
}

fn ljust(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let size = size_opt(p, h)?;
    let pad = pad_char(h);
    string_helper(p, |s| {
        let len = s.chars().count();
        format!("{s}{}", repeat_pad(&pad, size.saturating_sub(len)))
    })
}

fn rjust(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let size = size_opt(p, h)?;
    let pad = pad_char(h);
    string_helper(p, |s| {
        let len = s.chars().count();
        format!("{}{s}", repeat_pad(&pad, size.saturating_sub(len)))
    })
}

fn cut(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let what = p.get(1).map_or_else(|| " ".to_owned(), to_text);
    string_helper(p, |s| s.replace(&what, ""))
}

fn default_if_empty(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let empty = match p.first() {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Bool(b)) => !b,
        _ => false,
    };
    Ok(if empty {
        p.get(1).cloned().unwrap_or(Value::Null)
    } else {
        p[0].clone()
    })
}

fn slugify(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    string_helper(p, |s| {
        s.trim()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '_' || c.is_whitespace() || *c == '-')
            .collect::<String>()
            .to_lowercase()
            .chars()
            .map(|c| if c.is_whitespace() { '-' } else { c })
            .collect()
    })
}

/// Java's `String.format`, for `%s`, `%d`, `%f`, `%x`, `%%` and `%n` with flags,
/// width and precision.
fn string_format(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let fmt = text(p, 0)?;
    let mut args = p[1..].iter();
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        let conv = loop {
            match chars.next() {
                Some(c) if c.is_ascii_alphabetic() || c == '%' => break c,
                Some(c) => spec.push(c),
                None => return Err(format!("bad format {fmt:?}")),
            }
        };
        let left = spec.contains('-');
        let zero = spec.trim_start_matches('-').starts_with('0');
        let (width, precision) = match spec
            .trim_start_matches(['-', '0', '+', ','])
            .split_once('.')
        {
            Some((w, pr)) => (w.parse::<usize>().ok(), pr.parse::<usize>().ok()),
            None => (
                spec.trim_start_matches(['-', '0', '+', ','])
                    .parse::<usize>()
                    .ok(),
                None,
            ),
        };
        let body = match conv {
            '%' => "%".to_owned(),
            'n' => "\n".to_owned(),
            's' | 'S' => {
                let v = args.next().map(to_text).unwrap_or_else(|| "null".into());
                let v = match precision {
                    Some(pr) => v.chars().take(pr).collect(),
                    None => v,
                };
                if conv == 'S' { v.to_uppercase() } else { v }
            }
            'd' => int(args.next().ok_or("missing argument")?)?.to_string(),
            'x' | 'X' => {
                let s = format!("{:x}", int(args.next().ok_or("missing argument")?)?);
                if conv == 'X' { s.to_uppercase() } else { s }
            }
            'f' => format!(
                "{:.*}",
                precision.unwrap_or(6),
                number(args.next().ok_or("missing argument")?)?
            ),
            other => return Err(format!("unsupported conversion %{other}")),
        };
        let width = width.unwrap_or(0);
        let len = body.chars().count();
        if len >= width {
            out.push_str(&body);
        } else if left {
            out.push_str(&body);
            out.push_str(&" ".repeat(width - len));
        } else if zero {
            let (sign, digits) = body
                .strip_prefix('-')
                .map_or(("", body.as_str()), |d| ("-", d));
            out.push_str(sign);
            out.push_str(&"0".repeat(width - len));
            out.push_str(digits);
        } else {
            out.push_str(&" ".repeat(width - len));
            out.push_str(&body);
        }
    }
    Ok(Value::String(out))
}

fn strip_tags(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let re = regex_for(r"<[^>]*>")?;
    string_helper(p, |s| re.replace_all(s, "").into_owned())
}

/// Apache Commons' `StringUtils.abbreviate(value, width)`.
fn abbreviate(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let width = int(arg(p, 1)?)?;
    if width < 4 {
        return Err("Minimum abbreviation width is 4".into());
    }
    let width = width as usize;
    string_helper(p, |s| {
        if s.chars().count() <= width {
            s.to_owned()
        } else {
            format!("{}...", s.chars().take(width - 3).collect::<String>())
        }
    })
}

/// Apache Commons' `WordUtils.wrap(value, width)`.
fn word_wrap(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let width = int(arg(p, 1)?)?.max(1) as usize;
    string_helper(p, |s| {
        let mut lines = Vec::new();
        let mut line = String::new();
        for word in s.split(' ').filter(|w| !w.is_empty()) {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
        lines.join("\n")
    })
}

fn yes_no(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let pick = |k: &str, d: &str| opt_text(h, k).unwrap_or_else(|| d.to_owned());
    Ok(Value::String(match p.first() {
        Some(Value::Bool(true)) => pick("yes", "yes"),
        Some(Value::Bool(false)) => pick("no", "no"),
        _ => pick("maybe", "maybe"),
    }))
}

fn trim(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(text(p, 0)?.trim().to_owned()))
}

fn replace(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let (from, to) = (text(p, 1)?, text(p, 2)?);
    string_helper(p, |s| s.replace(&from, &to))
}

fn regex_extract(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    let pattern = text(p, 1)?;
    let Ok(re) = regex_for(&pattern) else {
        return error(format!("Invalid regex string {pattern}"));
    };
    let Some(name) = p.get(2) else {
        return match re.find(&s) {
            Some(m) => Ok(Value::String(m.as_str().to_owned())),
            None => h
                .get("default")
                .cloned()
                .map_or_else(|| error(format!("Nothing matched {pattern}")), Ok),
        };
    };
    let groups: Vec<Value> = re
        .captures_iter(&s)
        .flat_map(|c| {
            c.iter()
                .skip(1)
                .map(|m| m.map_or(Value::Null, |m| Value::String(m.as_str().to_owned())))
                .collect::<Vec<_>>()
        })
        .collect();
    if groups.is_empty() {
        return h
            .get("default")
            .cloned()
            .map_or_else(|| error(format!("Nothing matched {pattern}")), Ok);
    }
    set_var(&to_text(name), Value::Array(groups), true);
    Ok(Value::Null)
}

/// `formData`: an `application/x-www-form-urlencoded` body as fields (each a list,
/// written as its first value).
fn form_data(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let body = text(p, 0)?;
    let decode = is_true(h.get("urlDecode"));
    let mut fields: Map<String, Value> = Map::new();
    for pair in body.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        let dec = |s: &str| {
            if decode {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            } else {
                s.to_owned()
            }
        };
        let k = dec(k.trim());
        if let Value::Array(a) = fields.entry(k).or_insert_with(|| json!([])) {
            a.push(Value::String(dec(v.trim())));
        }
    }
    let fields = Value::Object(fields);
    match p.get(1) {
        Some(name) => {
            set_var(&to_text(name), fields, true);
            Ok(Value::Null)
        }
        None => Ok(Value::String(java_first_values(&fields))),
    }
}

/// A map of lists written as WireMock's map of `ListOrSingle`: `{a=1, b=x}`.
fn java_first_values(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, x)| format!("{k}={}", to_text(&first_of(x))))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        other => to_text(other),
    }
}

/// Handlebars.java's `neq`.
fn neq(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let a = p.first().unwrap_or(&Value::Null);
    let b = p.get(1).unwrap_or(&Value::Null);
    Ok(Value::Bool(a != b))
}

fn val(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let v = match p.first() {
        Some(v) if !v.is_null() => v.clone(),
        _ => h
            .get("or")
            .filter(|v| !v.is_null())
            .or_else(|| h.get("default"))
            .cloned()
            .unwrap_or(Value::Null),
    };
    match h.get("assign").filter(|v| !v.is_null()) {
        Some(name) => {
            set_var(&to_text(name), v, false);
            Ok(Value::Null)
        }
        None => Ok(v),
    }
}

fn assign(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let name = text(p, 0)?;
    let value = text(p, 1).unwrap_or_default();
    set_var(&name, Value::String(value.trim().to_owned()), false);
    Ok(Value::Null)
}

/// The machine's name, as WireMock's helper writes it; decoy looks it up (once)
/// the way Java's `InetAddress.getLocalHost().getHostName()` does.
fn hostname(_: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(decoy_plugin::request_info::hostname()))
}

/// WireMock permits no system key unless it is configured to; neither does this.
fn system_value(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    match opt_text(h, "key").filter(|k| !k.is_empty()) {
        None => error("The key cannot be empty"),
        Some(k) => error(format!("Access to {k} is denied")),
    }
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

/// WireMock's `randomValue`: `length` characters (36 by default) of `type`'s set,
/// then lower-cased, or upper-cased with `uppercase=true` (a UUID too). A `type`
/// WireMock does not define (`'number'`, `'string'`, a lower-case `'numeric'`) is
/// printable ASCII, space to `~`, as WireMock's fallback; `ALPHANUMERIC_AND_SYMBOLS`
/// is `!` to `}` (checked against 3.13.2).
fn random_value(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    const LETTERS_DIGITS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let kind = opt_text(h, "type").unwrap_or_else(|| "ALPHANUMERIC".into());
    let s = if kind == "UUID" {
        uuid::Uuid::new_v4().to_string()
    } else {
        let length = match h.get("length") {
            Some(v) => int(v)?,
            None => 36,
        };
        if !(0..=100_000).contains(&length) {
            return Err(format!("length {length} is out of range"));
        }
        let ascii = |from: u8, to: u8| (from..=to).collect::<Vec<u8>>();
        let alphabet: std::borrow::Cow<'static, [u8]> = match kind.as_str() {
            "ALPHANUMERIC" => LETTERS_DIGITS.into(),
            "ALPHABETIC" => LETTERS_DIGITS[..52].into(),
            "NUMERIC" => b"0123456789".as_slice().into(),
            "HEXADECIMAL" => b"ABCDEF0123456789".as_slice().into(),
            "ALPHANUMERIC_AND_SYMBOLS" => ascii(b'!', b'}').into(),
            _ => ascii(b' ', b'~').into(),
        };
        let mut rng = rand::rng();
        (0..length)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
            .collect()
    };
    Ok(Value::String(if truthy(h.get("uppercase")) {
        s.to_uppercase()
    } else {
        s.to_lowercase()
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

fn now(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    dates::render(chrono::Utc::now(), &date_style(h))
}

fn date(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let d = dates::parse_value(arg(p, 0)?, None)?;
    dates::render(d, &date_style(h))
}

fn parse_date(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let format = opt_text(h, "format");
    let d = dates::parse_value(arg(p, 0)?, format.as_deref())?;
    Ok(Value::String(dates::iso(d)))
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
