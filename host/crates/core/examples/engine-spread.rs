//! The engine's share of a request spread over many stubs: loads roots of 10 and
//! 10,000 one-stub files (the benchmark's mix of exact, regex and template URLs,
//! `bench/bench.py`'s `stub`), then times `Engine::respond` on a random stub of the
//! set, with some other memory written between requests as a server's network work
//! would (so stubs leave the caches as they do under load). Prints nanoseconds per
//! request for each size and their ratio.
//!
//!     cargo run --release -p decoy-core --example engine-spread [-- REQUESTS [KIB]]
//!
//! Only the matching and planning are timed: no socket, no journal.

use std::time::Instant;

use decoy_core::engine::Engine;
use decoy_core::mapping::load::load_root;
use decoy_spec::request::RequestSnapshot;

fn stub(i: usize) -> (String, String) {
    let (request, path) = match i % 4 {
        0 | 1 => (
            format!(r#"{{"method": "GET", "url": "/api/v1/items/{i}"}}"#),
            format!("/api/v1/items/{i}"),
        ),
        2 => (
            format!(r#"{{"method": "GET", "urlPathPattern": "/api/v2/res{i}/[0-9]+"}}"#),
            format!("/api/v2/res{i}/42"),
        ),
        _ => (
            format!(r#"{{"method": "GET", "urlPathTemplate": "/api/v3/res{i}/{{id}}"}}"#),
            format!("/api/v3/res{i}/42"),
        ),
    };
    let json = format!(
        r#"{{"request": {request}, "response": {{"status": 200, "headers": {{"Content-Type": "text/plain"}}, "body": "stub {i}"}}}}"#
    );
    (json, path)
}

fn measure(n: usize, requests: usize, scratch: &mut [u8], per_request: usize) -> f64 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir_all(dir.path().join("mappings")).expect("a mappings folder");
    let mut paths = Vec::new();
    for i in 0..n {
        let (json, path) = stub(i);
        std::fs::write(dir.path().join(format!("mappings/stub-{i:05}.json")), json)
            .expect("a stub file");
        paths.push(path);
    }
    let report = load_root(dir.path()).expect("the root loads");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let engine = Engine::new(Vec::new());
    engine.replace_shared(report.mappings);
    let reqs: Vec<RequestSnapshot> = paths
        .iter()
        .map(|p| RequestSnapshot::new("GET", p.as_str()))
        .collect();
    let mut seed = 42u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let mut offset = 0;
    let mut run = |count: usize| {
        let t0 = Instant::now();
        for _ in 0..count {
            let req = &reqs[next() % reqs.len()];
            let outcome = engine.respond(req);
            assert!(matches!(
                outcome,
                decoy_core::engine::Outcome::Matched { .. }
            ));
            drop(outcome);
            // Other work between requests: write `per_request` bytes of the scratch.
            for b in scratch[offset..offset + per_request].iter_mut().step_by(64) {
                *b = b.wrapping_add(1);
            }
            offset = (offset + per_request) % (scratch.len() - per_request);
        }
        t0.elapsed().as_nanos() as f64 / count as f64
    };
    run(requests / 4);
    run(requests)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let requests: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let kib: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let mut scratch = vec![0u8; 64 << 20];
    let mut rounds = Vec::new();
    for round in 0..3 {
        let small = measure(10, requests, &mut scratch, kib << 10);
        let large = measure(10_000, requests, &mut scratch, kib << 10);
        println!("round {round}: 10 stubs {small:.0} ns, 10,000 stubs {large:.0} ns a request");
        rounds.push((small, large));
    }
    rounds.sort_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)));
    let (small, large) = rounds[1];
    println!(
        "median round: 10 stubs {small:.0} ns, 10,000 stubs {large:.0} ns, extra {:.0} ns a request",
        large - small
    );
}
