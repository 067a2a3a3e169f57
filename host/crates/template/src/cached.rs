//! A compiled template as bytes, and the key it is kept under in the
//! `response-template` plugin's `cache` (the `cache` host interface: values shared
//! by every instance of one loaded plugin).
//!
//! Two sides write there and one reads: an instance of the plugin that compiled a
//! template puts it for the others, and decoy's host puts each template it compiled
//! when the template's stub loaded (for a stub whose templates the plugin renders),
//! so that no instance compiles it at all. The plugin reads with [`cache_key`] and
//! [`from_bytes`] what either side wrote with [`cache_key`] and [`to_bytes`]: both
//! sides call these, so the key and the form cannot drift apart.
//!
//! The form is postcard, of handlebars 6.4.4's `Template` as [`crate::compile`]
//! leaves it (decoy's vendored copy, feature `serde_template`: vendor/README.md):
//! what both sides make alike. The plugin then rewrites a template's values into
//! calls of its own helpers, which the host knows nothing of; it does that on what
//! it reads, a walk over the elements, far cheaper than compiling.
//! postcard is compact and has a stable wire format (1.0), but it is not
//! self-describing: the bytes only read back into the very same types, hence
//! [`CACHED_FORM`] in every key.

use crate::Template;

/// What the key of a compiled template starts with: the form of the bytes stored.
/// The cache is emptied when the plugin is reloaded, and the host only writes to
/// the plugin bundled in its own binary, so another build never reads these bytes;
/// the tag still changes whenever the form does (a new handlebars, a change in the
/// vendored serde support, another format), so that it never could.
pub const CACHED_FORM: &str = "template/postcard/handlebars-6.4.4/v2";

/// The cache key of `text`'s compiled form: [`CACHED_FORM`] and 128 bits of the
/// SHA-256 of `text` as written (before [`crate::rewrite_paths`]), in hex.
pub fn cache_key(text: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let digest = Sha256::digest(text.as_bytes());
    let mut key = String::with_capacity(CACHED_FORM.len() + 33);
    key.push_str(CACHED_FORM);
    key.push(':');
    for b in &digest[..16] {
        let _ = write!(key, "{b:02x}");
    }
    key
}

/// A compiled template that could not be written as bytes, or bytes that do not
/// read back as one (only a bug could cause either: the reader compiles instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormError(String);

impl std::fmt::Display for FormError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormError {}

/// `template` in the cached form (see the module's documentation).
pub fn to_bytes(template: &Template) -> Result<Vec<u8>, FormError> {
    postcard::to_allocvec(template).map_err(|e| FormError(e.to_string()))
}

/// The template `bytes` hold, written by [`to_bytes`].
pub fn from_bytes(bytes: &[u8]) -> Result<Template, FormError> {
    postcard::from_bytes(bytes).map_err(|e| FormError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_stored_form_and_differs_with_the_text() {
        let a = cache_key("{{a}}");
        assert!(a.starts_with(CACHED_FORM), "{a}");
        assert_eq!(a.len(), CACHED_FORM.len() + 1 + 32, "128 bits in hex");
        assert_eq!(a, cache_key("{{a}}"));
        assert_ne!(a, cache_key("{{b}}"));
        // The text as written: a WireMock path and its rewrite are two texts.
        assert_ne!(
            cache_key("{{request.path.[0]}}"),
            cache_key("{{request.pathSegments.[0]}}")
        );
    }

    #[test]
    fn a_compiled_template_reads_back_to_itself_and_other_bytes_are_an_error() {
        let t = crate::compile("{{#each request.query.tag}}{{this}};{{/each}} {{math 1 '+' 2.5}}")
            .expect("it compiles");
        let back = from_bytes(&to_bytes(&t).expect("it is written")).expect("and read back");
        assert!(back == t);
        assert!(from_bytes(b"\xff not a template").is_err());
    }
}
