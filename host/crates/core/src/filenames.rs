//! The names of the stub files decoy writes, as WireMock 3's `FilenameMaker` names
//! them, so a root saved or recorded by either engine holds the same files.
//!
//! A name is a Handlebars template rendered over the stub and then sanitised: spaces
//! become `-`, every character but ASCII letters, digits, `_`, `-` and `.` is dropped,
//! and the rest is lower-cased. WireMock's default template is
//! `{{#if name}}{{{name}}}{{else}}{{{method}}}-{{{url}}}{{/if}}-{{{id}}}` followed by
//! `.json`; `--filename-template` replaces the whole of it, extension included (as in
//! WireMock, where `--filename-template '{{{id}}}'` writes files without one). It
//! names the stub files of `POST /__admin/mappings/save` and of recordings and
//! snapshots; a recording's body files keep the default template, with the body's
//! extension, and `--record-mappings` names its files in its own way.
//!
//! The template sees what WireMock's `FilenameTemplateModel` offers: `id`, `name`,
//! `url` (the URL matcher's value, whichever of `url`, `urlPattern`, `urlPath`,
//! `urlPathPattern`, `urlPathTemplate` the stub has, or `(always)`), `method` (`ANY`
//! when absent), `priority`, `scenarioName`, `requiredScenarioState`,
//! `newScenarioState`, `insertionIndex`, and the stub's `request`, `response` and
//! `metadata` objects as written (`{{{request.urlPath}}}`, `{{{metadata.team}}}`). A
//! value the stub does not have renders as nothing.
//!
//! Since `/` and `\` are dropped, a name is always one file directly in `mappings/`;
//! a template that can only give an empty name, `.` or `..` is refused when it is
//! read, and a stub whose values give one of those is refused when it is written. A
//! name that is taken already is numbered by [`crate::stub_files`] (WireMock writes
//! over the file instead).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};

/// WireMock's default template, without the extension.
pub const DEFAULT_TEMPLATE: &str =
    "{{#if name}}{{{name}}}{{else}}{{{method}}}-{{{url}}}{{/if}}-{{{id}}}";

/// The request fields holding the URL matcher, in the order WireMock's
/// `UrlPattern.fromOneOf` takes the first one present.
const URL_FIELDS: &[&str] = &[
    "url",
    "urlPattern",
    "urlPath",
    "urlPathPattern",
    "urlPathTemplate",
];

/// One compiled file-name template.
#[derive(Clone)]
pub struct FilenameMaker {
    /// The template as given (with its extension), for messages.
    template: Arc<str>,
    registry: Arc<handlebars::Handlebars<'static>>,
}

impl std::fmt::Debug for FilenameMaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilenameMaker")
            .field("template", &self.template)
            .finish()
    }
}

impl Default for FilenameMaker {
    /// WireMock's default: `<name>-<id>.json`, or `<method>-<url>-<id>.json` for a
    /// stub without a name.
    fn default() -> Self {
        FilenameMaker::compile(&format!("{DEFAULT_TEMPLATE}.json"))
            .expect("the default template compiles")
    }
}

impl FilenameMaker {
    /// `--filename-template`: checked as WireMock checks it (every part between `-`
    /// must hold a `{{{…}}}` value), compiled, and tried on sample stubs so a template
    /// that cannot name a file inside `mappings/` is refused before anything is
    /// written. The error says why, for the start-up message.
    pub fn from_option(template: &str) -> Result<FilenameMaker, String> {
        // Java's `split("-")`: trailing empty pieces dropped, others kept.
        let mut parts: Vec<&str> = template.split('-').collect();
        while parts.last().is_some_and(|p| p.is_empty()) {
            parts.pop();
        }
        if let Some(bad) = parts
            .iter()
            .find(|p| !p.contains("{{{") || !p.contains("}}}"))
        {
            return Err(format!(
                "every part of the template between '-' must hold a value in triple braces, such as {{{{{{id}}}}}}, and {bad:?} does not (WireMock refuses it too: \"Format for filename template should be contain handlebar value\")"
            ));
        }
        let maker = FilenameMaker::compile(template)?;
        // A stub with every value the model offers: a template that names no file
        // even for it (only dots, or nothing but characters that are dropped) can
        // never name one. One that needs a value some stubs lack (`{{{name}}}`) is
        // accepted, as in WireMock; such a stub is refused when it is written.
        let sample = json!({
            "id": "3f1c2a4e-0000-4000-8000-000000000000", "name": "Get user", "priority": 1,
            "scenarioName": "s", "requiredScenarioState": "Started", "newScenarioState": "next",
            "insertionIndex": 1, "metadata": {}, "request": {"method": "GET", "url": "/users/1"},
            "response": {"status": 200}
        });
        let name = maker.render(&sample, "3f1c2a4e-0000-4000-8000-000000000000")?;
        if !usable(&name) {
            return Err(format!(
                "it gives the file name {name:?} even for a stub with every value set, which is not a file inside mappings/ (a name must keep a letter, a digit, '_' or '-' once '/', spaces and other characters are dropped)"
            ));
        }
        Ok(maker)
    }

    /// A recording's body file: the default template with `extension` (`json`, `txt`...).
    pub fn for_body_file(extension: &str) -> FilenameMaker {
        FilenameMaker::compile(&format!("{DEFAULT_TEMPLATE}.{extension}"))
            .unwrap_or_else(|_| FilenameMaker::default())
    }

    fn compile(template: &str) -> Result<FilenameMaker, String> {
        let mut registry = handlebars::Handlebars::new();
        registry
            .register_template_string("name", template)
            .map_err(|e| format!("it is not a valid Handlebars template: {e}"))?;
        Ok(FilenameMaker {
            template: Arc::from(template),
            registry: Arc::new(registry),
        })
    }

    /// The template as given.
    pub fn template(&self) -> &str {
        &self.template
    }

    /// The file name for stub `stub` (its JSON, as written) whose id is `id`, or why
    /// there is none (a helper failed, or the name would not be a file of its own).
    pub fn file_name(&self, stub: &Value, id: &str) -> Result<String, String> {
        let name = self.render(stub, id)?;
        if usable(&name) {
            Ok(name)
        } else {
            Err(format!(
                "the file-name template {:?} gives {name:?} for stub {id}, which is not a file inside mappings/",
                self.template
            ))
        }
    }

    fn render(&self, stub: &Value, id: &str) -> Result<String, String> {
        let rendered = self
            .registry
            .render("name", &model(stub, id))
            .map_err(|e| {
                format!(
                    "the file-name template {:?} cannot be rendered: {e}",
                    self.template
                )
            })?;
        Ok(sanitise(&rendered))
    }
}

/// A sanitised name that is one file: not empty, `.` or `..`.
fn usable(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".."
}

/// What a template sees of a stub (WireMock's `FilenameTemplateModel`).
fn model(stub: &Value, id: &str) -> Value {
    let request = stub.get("request");
    let field = |k: &str| stub.get(k).cloned().unwrap_or(Value::Null);
    let url = URL_FIELDS
        .iter()
        .find_map(|k| request.and_then(|r| r.get(*k)).and_then(Value::as_str))
        .unwrap_or("(always)");
    let method = request
        .and_then(|r| r.get("method"))
        .and_then(Value::as_str)
        .unwrap_or("ANY");
    json!({
        "id": id,
        "name": field("name"),
        "url": url,
        "method": method,
        "priority": field("priority"),
        "scenarioName": field("scenarioName"),
        "requiredScenarioState": field("requiredScenarioState"),
        "newScenarioState": field("newScenarioState"),
        "insertionIndex": field("insertionIndex"),
        "request": request.cloned().unwrap_or(Value::Null),
        "response": field("response"),
        "metadata": field("metadata"),
    })
}

/// WireMock's `FilenameMaker.sanitise`: Java's `split(" ")` (trailing empty pieces
/// dropped) joined with `-`, then `[^\w-.]` removed (Java's `\w` is ASCII) and the
/// rest lower-cased.
pub fn sanitise(s: &str) -> String {
    let mut pieces: Vec<&str> = s.split(' ').collect();
    while pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces
        .join("-")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The `name` WireMock gives a recorded stub (`FilenameMaker.sanitizeUrl` of the
/// request's path): the path percent-decoded, `/` turned into `_` and white space
/// into `-`, accents taken off (Unicode NFD, then [`sanitise`]), `_` trimmed from both
/// ends, at most 200 characters: `/api/Users/7` is `api_users_7`, `/caf%C3%A9/a%20b`
/// is `cafe_a-b`, and `/` gives `""`.
pub fn recorded_stub_name(raw_path: &str) -> String {
    let decoded: Cow<str> = percent_encoding::percent_decode_str(raw_path).decode_utf8_lossy();
    let spaced: String = decoded
        .chars()
        .map(|c| match c {
            '/' => '_',
            // Java's `\s`: space, \t, \n, \x0B, \f, \r.
            ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' => '-',
            c => c,
        })
        .collect();
    let nfd = icu_normalizer::DecomposingNormalizerBorrowed::new_nfd().normalize(&spaced);
    sanitise(&nfd).trim_matches('_').chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(maker: &FilenameMaker, stub: Value) -> String {
        let id = stub["id"].as_str().unwrap_or("id").to_owned();
        maker.file_name(&stub, &id).unwrap()
    }

    #[test]
    fn file_names_are_sanitised_as_wiremock_does() {
        assert_eq!(sanitise("GET-/imp/3-id"), "get-imp3-id");
        assert_eq!(sanitise("  Hi There/\u{e9}!-id"), "--hi-there-id");
        assert_eq!(sanitise("POST-/p q/\u{e9}-id"), "post-p-q-id");
        assert_eq!(sanitise("ANY-/x/.*-id"), "any-x.-id");
        assert_eq!(sanitise("PUT-(always)-id"), "put-always-id");
        assert_eq!(sanitise("a  "), "a");
    }

    #[test]
    fn the_default_names_a_stub_by_its_name_or_else_its_method_and_url() {
        let d = FilenameMaker::default();
        assert_eq!(
            name(
                &d,
                json!({"id": "A-1", "name": "Get User 1", "request": {"url": "/users/1"}})
            ),
            "get-user-1-a-1.json"
        );
        assert_eq!(
            name(
                &d,
                json!({"id": "a1", "request": {"method": "GET", "url": "/users/1?x=1&y=2"}})
            ),
            "get-users1x1y2-a1.json"
        );
        assert_eq!(
            name(
                &d,
                json!({"id": "a1", "request": {"urlPattern": "/users/[0-9]+"}})
            ),
            "any-users0-9-a1.json"
        );
        assert_eq!(
            name(&d, json!({"id": "a1", "name": "", "request": {}})),
            "any-always-a1.json"
        );
    }

    #[test]
    fn a_template_replaces_the_whole_name_extension_included() {
        let t = FilenameMaker::from_option("{{{method}}}-{{{request.urlPath}}}-{{{id}}}").unwrap();
        assert_eq!(
            name(
                &t,
                json!({"id": "a1", "request": {"method": "POST", "urlPath": "/a/b"}})
            ),
            "post-ab-a1"
        );
        let t =
            FilenameMaker::from_option("{{{metadata.team}}}-{{{priority}}}-{{{id}}}.json").unwrap();
        assert_eq!(
            name(
                &t,
                json!({"id": "a1", "priority": 3, "metadata": {"team": "Blue"}, "request": {}})
            ),
            "blue-3-a1.json"
        );
    }

    #[test]
    fn templates_wiremock_refuses_or_that_name_no_file_are_refused() {
        // A part between dashes without a triple-brace value, as WireMock checks.
        let e = FilenameMaker::from_option("stub-{{{id}}}.json").unwrap_err();
        assert!(e.contains("\"stub\""), "{e}");
        assert!(FilenameMaker::from_option("{{method}}}.json").is_err());
        // Not Handlebars.
        let e = FilenameMaker::from_option("{{{id}}}{{#if name}}").unwrap_err();
        assert!(e.contains("Handlebars"), "{e}");
        // Only dots survive: `..` would be the folder above mappings/.
        let e = FilenameMaker::from_option("{{{nothing}}}..").unwrap_err();
        assert!(e.contains("\"..\""), "{e}");
        // A value that is all slashes leaves nothing.
        assert!(FilenameMaker::from_option("{{{nothing}}}/").is_err());
        // Accepted: a trailing dash is dropped by Java's split, as in WireMock; and a
        // value only some stubs have.
        assert!(FilenameMaker::from_option("{{{id}}}-").is_ok());
        assert!(FilenameMaker::from_option("{{{name}}}.json").is_ok());
    }

    #[test]
    fn a_stub_whose_values_name_no_file_is_refused_when_written() {
        let t = FilenameMaker::from_option("{{{name}}}").unwrap();
        for stub in [json!({"name": "..", "request": {}}), json!({"request": {}})] {
            let e = t.file_name(&stub, "a1").unwrap_err();
            assert!(e.contains("not a file inside mappings/"), "{e}");
        }
    }

    #[test]
    fn recorded_stubs_are_named_from_the_decoded_path() {
        // As WireMock 3.13.2 named the stubs it recorded for these paths.
        assert_eq!(recorded_stub_name("/api/Users/7"), "api_users_7");
        assert_eq!(recorded_stub_name("/caf%C3%A9/a%20b"), "cafe_a-b");
        assert_eq!(recorded_stub_name("/"), "");
        assert_eq!(
            recorded_stub_name("/A%20B/Caf%C3%A9/x.json"),
            "a-b_cafe_x.json"
        );
        assert_eq!(recorded_stub_name("//x//"), "x");
        assert_eq!(
            recorded_stub_name(&format!("/{}", "a".repeat(300))).len(),
            200
        );
    }
}
