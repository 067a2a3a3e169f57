//! The MQ files of a test's root, written alike by every transport's tests.

use serde_json::{Value, json};

/// `mq-connections.json` with one connection: `id`, and `data` as its
/// `connectionData`.
pub fn connections(id: &str, data: Value) -> String {
    json!([{"connectionId": id, "connectionData": data}]).to_string()
}

/// `data` with the fields of `extra` added, replacing its own of the same name: a
/// test's variation on its module's usual connection.
pub fn with(mut data: Value, extra: Value) -> Value {
    data.as_object_mut()
        .expect("connection data is an object")
        .extend(
            extra
                .as_object()
                .expect("extra fields are an object")
                .clone(),
        );
    data
}
