//! decoy: serde_template. Not part of handlebars 6.4.4: added by decoy (see
//! vendor/README.md) so that a compiled [`Template`](crate::Template) can be written
//! as bytes and read back with any serde format, including the compact ones that are
//! not self-describing (postcard, bincode). The types of `template.rs` and
//! `json/path.rs` derive `Serialize` and `Deserialize` behind the `serde_template`
//! feature; the two fields a derive cannot handle go through the modules below.

/// A literal parameter (`serde_json::Value`) as its JSON text: a `Value` is read
/// back through `deserialize_any`, which formats that are not self-describing do not
/// support. Numbers keep their value (serde_json writes a float in a form it parses
/// back to the same float).
pub(crate) mod json_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub(crate) fn serialize<S: Serializer>(v: &Value, s: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(v).map_err(serde::ser::Error::custom)?;
        text.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}

/// The grammar rule of a path segment (`PathSeg::Ruled`): pest's generated `Rule`
/// has no serde support, and a path only ever holds three of its variants
/// (`parse_json_path_from_iter`), written by name. Any other is an error, both
/// ways, rather than a guess.
pub(crate) mod path_rule {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::grammar::Rule;

    const RULES: [(Rule, &str); 3] = [
        (Rule::path_root, "path_root"),
        (Rule::path_local, "path_local"),
        (Rule::path_up, "path_up"),
    ];

    pub(crate) fn serialize<S: Serializer>(rule: &Rule, s: S) -> Result<S::Ok, S::Error> {
        match RULES.iter().find(|(r, _)| r == rule) {
            Some((_, name)) => s.serialize_str(name),
            None => Err(serde::ser::Error::custom(format!(
                "a path segment of rule {rule:?}, which a path never holds"
            ))),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Rule, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        match RULES.iter().find(|(_, n)| *n == name) {
            Some((rule, _)) => Ok(*rule),
            None => Err(serde::de::Error::custom(format!(
                "{name:?} is not the rule of a path segment"
            ))),
        }
    }
}
