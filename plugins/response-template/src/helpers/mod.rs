//! WireMock's template helpers: the table of them, their registration with
//! Handlebars, and what every helper shares.
//!
//! Built into Handlebars already: `if`, `unless`, `each`, `with`, `lookup`, `eq`,
//! `gt`, `gte`, `lt`, `lte`, `and`, `or`, `not`.
//!
//! Added here, with WireMock 3.13's names, arguments and outputs, one family per file:
//! - [`json`]: `jsonPath`, `parseJson`, `toJson`, `formatJson`, `jsonMerge`,
//!   `jsonRemove`, `jsonArrayAdd`
//! - [`xml`]: `xPath`, `soapXPath`, `formatXml`
//! - [`strings`] (Handlebars.java's StringHelpers and WireMock's): `upper`, `lower`,
//!   `capitalize`, `capitalizeFirst`, `center`, `cut`, `defaultIfEmpty`, `ljust`,
//!   `rjust`, `slugify`, `stringFormat`, `stripTags`, `abbreviate`, `wordWrap`,
//!   `yesno`, `trim`, `substring`, `replace`, `base64`, `urlEncode`, `regexExtract`,
//!   `matches`
//! - [`lists`] (numbers and lists): `math`, `size`, `array`, `arrayAdd`, `arrayRemove`,
//!   `range`, `join`, `arrayJoin`, `contains`, `isEven`, `isOdd`, `stripes`, `pickRandom`
//! - [`values`] (values from outside the arguments):
//!   - random: `randomValue`, `randomInt`, `randomDecimal`
//!   - dates: `now`, `date`, `parseDate`, `dateFormat`
//!   - a form body: `formData`
//!   - logic and variables: `neq`, `val`, `assign`
//!   - system: `hostname`, `systemValue` (denied, as WireMock denies every key unless
//!     configured otherwise)
//!
//! A helper used as `{{helper ...}}` writes its value as WireMock's Java object
//! would print (see [`Kind`]); used as a subexpression it gives the value itself.
//! Where WireMock's helper reports a problem as text, the same `[ERROR: ...]` text
//! is the value; where WireMock's throws (and the response is a 500), the helper
//! fails.
//!
//! # Layout
//!
//! This file holds the table ([`SIMPLE`]), registration, the Handlebars glue (how a
//! helper's arguments are read from the template, how its value is written, how the
//! variables it sets reach the rest of the template) and the argument readers every
//! family uses (`arg`, `text`, `number`, `int`, `truthy`...). [`print`] is how a
//! value is written as text (Java's `toString`, Jackson, json-smart); it imports
//! nothing of the helpers. Each family imports this file's readers and [`print`],
//! never another family; this file names the families' functions only in the table.

mod json;
mod lists;
mod print;
mod strings;
mod values;
mod xml;

use std::cell::RefCell;

use handlebars::{
    Context, Handlebars, Helper, HelperDef, HelperResult, Output, PathAndJson, RenderContext,
    RenderError, RenderErrorReason, Renderable, ScopedJson,
};
use serde_json::{Map, Value, json};

use json::{format_json, json_array_add, json_merge, json_path, json_remove, parse_json, to_json};
use lists::{
    array, array_add, array_join, array_remove, contains, is_even, is_odd, join, math, pick_random,
    range, size, stripes,
};
use print::to_text;
pub(crate) use print::{Kind, text_of};
use strings::{
    abbreviate, base64_helper, capitalize, capitalize_first, center, cut, default_if_empty, ljust,
    lower, regex_extract, regex_matches, replace, rjust, slugify, string_format, strip_tags,
    substring, trim, upper, url_encode, word_wrap, yes_no,
};
use values::{
    assign, date, date_format, form_data, hostname, neq, now, parse_date, random_decimal,
    random_int, random_value, system_value, val,
};
use xml::{format_xml, soap_x_path, x_path};

/// Java's `Double.toString`, as the plugin's tests check it.
#[cfg(test)]
pub(crate) use decoy_jsonfmt::java_double;

/// A helper that needs only its arguments: positional values and `key=value` pairs.
/// `Err` fails the response (WireMock's helper throws); an inline `[ERROR: ...]` is
/// an `Ok` value.
pub(crate) type Fun = fn(&[Value], &Map<String, Value>) -> Result<Value, String>;

/// How a helper behaves as a block (`{{#name ...}}...{{/name}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block {
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
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) fun: Fun,
    pub(crate) kind: Kind,
    /// Takes a multi-valued request field (`request.query.tag`) as the whole list;
    /// other helpers get its first value, as Java's `toString` of it.
    pub(crate) lists: bool,
    /// May set a template variable (so it is never rendered directly).
    pub(crate) assigns: bool,
    pub(crate) block: Block,
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
    spec("upper", upper),
    spec("lower", lower),
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
pub(crate) fn is_helper(name: &str) -> bool {
    const BUILT_IN: &[&str] = &[
        "if", "unless", "each", "with", "lookup", "raw", "log", "eq", "gt", "gte", "lt", "lte",
        "and", "or", "not", "len",
    ];
    BUILT_IN.contains(&name) || simple(name).is_some()
}

/// Helper `name`, if it is one of those added here.
pub(crate) fn simple(name: &str) -> Option<&'static Spec> {
    SIMPLE.iter().find(|s| s.name == name)
}

/// Calls helper `name`; an error names the helper, as Handlebars reports it.
pub(crate) fn run(
    spec: &Spec,
    params: &[Value],
    hash: &Map<String, Value>,
) -> Result<Value, String> {
    (spec.fun)(params, hash).map_err(|e| format!("{}: {e}", spec.name))
}

/// The name of the helper that writes a plain value (`{{path}}` is compiled as a
/// call to it, see [`crate::compile`]).
pub(crate) const VALUE: &str = "__value";

/// The name of the helper that renders a block named by a value rather than a
/// helper (`{{#request.query.q}}...{{else}}...{{/request.query.q}}` is compiled as
/// a call to it, see [`crate::compile`]).
pub(crate) const SECTION: &str = "__section";

pub(crate) fn register(h: &mut Handlebars<'static>) {
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
pub(crate) fn reset_vars() {
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
fn is_list_path(path: &str) -> bool {
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
fn first_of(v: &Value) -> Value {
    match v {
        Value::Array(a) => a
            .first()
            .cloned()
            .unwrap_or_else(|| Value::String(String::new())),
        other => other.clone(),
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

/// A helper of the table, as Handlebars calls it.
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

// The readers every family takes its arguments with.

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
