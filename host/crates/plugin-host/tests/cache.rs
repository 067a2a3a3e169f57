//! The `cache` host interface as plugins see it, through the bundled
//! `response-template` plugin, which keeps each template it compiles there: with
//! `isolation: per-request` every call is a fresh instance, so how many templates
//! the plugin reports compiling tells whether one instance found what another put.
//! (Its bounds and eviction order are unit tests in `src/cache.rs`.)

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use decoy_plugin_host::{Plugin, PluginRequest, Plugins, bundled, wit};

const PER_REQUEST: &str = r#"{"isolation": "per-request"}"#;
const TEMPLATE: &str = "{{#each request.query.tag}}<{{upper this}}>{{/each}}";

/// A plugins folder, removed when dropped.
struct Folder(std::path::PathBuf);

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn folder(files: &[(&str, &[u8])]) -> Folder {
    let dir = std::env::temp_dir().join(format!(
        "decoy-plugin-cache-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("a file in it");
    }
    Folder(dir)
}

fn render(plugin: &Arc<Plugin>, mapping: &str) -> String {
    let context = wit::CallContext {
        mapping_id: mapping.into(),
        mapping_name: None,
        parameters: "{}".into(),
    };
    let request = PluginRequest::from(wit::Request::Http(wit::HttpRequest {
        method: "GET".into(),
        url: "/t?tag=a&tag=b".into(),
        path: "/t".into(),
        query: vec![("tag".into(), "a".into()), ("tag".into(), "b".into())],
        headers: vec![],
        cookies: vec![],
        body: vec![],
        base_url: "http://localhost:8080".into(),
        path_parameters: vec![],
    }));
    let response = wit::Response::Http(wit::HttpResponse {
        status: 200,
        headers: vec![],
        body: TEMPLATE.as_bytes().to_vec(),
        delay_ms: None,
    });
    match plugin.transform(&context, &request, &response) {
        Ok(wit::Response::Http(h)) => String::from_utf8(h.body).expect("text"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_value_one_instance_puts_is_read_by_the_others_of_its_plugin_only_until_a_reload() {
    let wasm = bundled()[0].1;
    let dir = folder(&[
        ("response-template.json", PER_REQUEST.as_bytes()),
        ("copy.wasm", wasm),
        ("copy.json", PER_REQUEST.as_bytes()),
    ]);
    let plugins = Plugins::new(Some(dir.0.clone()), None);
    let template = plugins.get("response-template").unwrap();
    for mapping in ["m1", "m1", "m2", "m3", "m1"] {
        assert_eq!(render(&template, mapping), "<A><B>");
    }
    assert_eq!(template.stats.instances_created.load(Relaxed), 5);
    assert_eq!(
        template.stats.compilations.load(Relaxed),
        1,
        "five instances, one compilation"
    );

    // The same code loaded as another plugin has a cache of its own.
    let copy = plugins.get("copy").unwrap();
    assert_eq!(render(&copy, "m1"), "<A><B>");
    assert_eq!(copy.stats.compilations.load(Relaxed), 1);
    assert_eq!(template.stats.compilations.load(Relaxed), 1);

    // Reloaded code (here for a new settings file) starts with an empty cache.
    std::fs::write(
        dir.0.join("copy.json"),
        r#"{"isolation": "per-request", "timeoutMilliseconds": 200}"#,
    )
    .unwrap();
    plugins.reload("copy").expect("it is loaded").unwrap();
    assert_eq!(render(&copy, "m1"), "<A><B>");
    assert_eq!(render(&copy, "m1"), "<A><B>");
    assert_eq!(copy.stats.compilations.load(Relaxed), 2);
}
