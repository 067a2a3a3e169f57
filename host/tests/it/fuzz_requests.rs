//! A request-mutation fuzzer against a live server: valid HTTP/1.1 requests (stubbed,
//! unmatched, admin, chunked, form, JSON) are mutated byte by byte and structurally
//! with a fixed seed, sent on raw connections in batches, and after every batch a
//! control request must still be answered. The corpus of inputs that once failed
//! (`tests/fuzz-corpus/`) is replayed first.
//!
//! Deterministic (SplitMix64 from a fixed seed) and bounded (a fixed number of
//! mutations, every read with a timeout), so it runs in CI like any test. Set
//! `DECOY_FUZZ_ITERATIONS` for a longer run and `DECOY_FUZZ_SEED` for another seed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::common::{get, options, root};

/// SplitMix64: a tiny generator whose sequence never changes with a crate version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const SEEDS: &[&str] = &[
    "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /users/42?sort=asc&x=%20y HTTP/1.1\r\nHost: x\r\nCookie: a=1; b=2\r\nAccept: */*\r\n\r\n",
    "POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"a\": [1, 2, {\"b\": \"c\"}]}\r\n",
    "POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\n\r\nname=v&x=%41",
    "PUT /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    "GET /nothing-here HTTP/1.1\r\nHost: x\r\nX-Trace: 1\r\n\r\n",
    "GET /__admin/mappings HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /__admin/requests?limit=5 HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /__admin/requests/find HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n{\"method\": \"GET\"}",
    "GET /__admin/files/a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /__admin/near-misses/request HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\n{\"url\": \"/he\"}",
    "GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /hello HTTP/1.0\r\n\r\n",
];

/// Pieces structural mutations splice in.
const PIECES: &[&str] = &[
    "Content-Length: 5\r\n",
    "Content-Length: -1\r\n",
    "Content-Length: 99999999999999999999\r\n",
    "Content-Length: 3\r\nContent-Length: 4\r\n",
    "Transfer-Encoding: chunked\r\n",
    "Transfer-Encoding: gzip, chunked\r\n",
    "Expect: 100-continue\r\n",
    "Connection: upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
    "Host: \r\n",
    "X: \u{1}\u{7f}\r\n",
    ": no-name\r\n",
    "Authorization: Bearer \r\n",
    "Content-Type: multipart/form-data; boundary=zz\r\n",
    "\r\n\r\n",
    "ffffffffffffffff\r\n",
    "0\r\n\r\n",
    "%",
    "%zz%00",
    "/../../..",
    "?a=%ff&&=&b",
    "\u{0}",
    "HTTP/9.9",
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "{\"a\":",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
];

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(9) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.next() as u8;
            }
            2 => {
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(at..at, bytes);
            }
            3 if !out.is_empty() => {
                let end = (at + 1 + rng.below(32)).min(out.len());
                out.drain(at.min(end)..end);
            }
            4 if !out.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                let copy = out[at.min(end)..end].to_vec();
                out.splice(at..at, copy);
            }
            5 => out.truncate(at),
            6 => {
                let piece = rng.pick(PIECES).as_bytes().to_vec();
                out.splice(at..at, piece);
            }
            7 => {
                // A long header or URL: near and past the limits.
                let n = *rng.pick(&[100usize, 8 * 1024, 64 * 1024, 200 * 1024]);
                let filler = vec![b'a' + rng.below(26) as u8; n];
                out.splice(at..at, filler);
            }
            _ => {
                // Swap two request lines.
                let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
                if lines.len() > 2 {
                    let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                    let mut lines: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
                    lines.swap(a, b);
                    out = lines.join(&b'\n');
                }
            }
        }
    }
    out
}

/// Sends `input` on a fresh connection, closes the sending side and reads whatever
/// comes back, all within a few seconds. Outcomes do not matter, only that the server
/// lives on.
async fn fire(addr: SocketAddr, input: Vec<u8>) {
    let _ = tokio::time::timeout(Duration::from_secs(5), async move {
        let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
            return;
        };
        let _ = s.write_all(&input).await;
        let _ = s.shutdown().await;
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink).await;
    })
    .await;
}

/// Whether the server still answers a plain request.
async fn alive(addr: SocketAddr) -> bool {
    tokio::time::timeout(Duration::from_secs(20), get(addr, "/control"))
        .await
        .is_ok_and(|a| a.status == 200 && a.body == "alive")
}

/// Keeps a failing batch where a developer can find it, and says where.
fn keep_failure(batch: &[Vec<u8>], label: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    for (i, input) in batch.iter().enumerate() {
        let _ = std::fs::write(dir.join(format!("{label}-{i:03}.bin")), input);
    }
    dir
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz-corpus");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "bin"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_requests_never_stop_the_server_from_answering() {
    let dir = root(&[
        (
            "mappings/stubs.json",
            r#"{"mappings": [
                {"request": {"url": "/control"}, "response": {"body": "alive"}},
                {"request": {"url": "/hello"}, "response": {"body": "hi", "headers": {"X-A": "1"}}},
                {"request": {"urlPathPattern": "/users/[0-9]+", "queryParameters": {"sort": {"matches": "a.*"}}, "cookies": {"a": {"equalTo": "1"}}}, "response": {"status": 201}},
                {"request": {"method": "POST", "url": "/json", "bodyPatterns": [{"equalToJson": {"a": [1, 2, {"b": "c"}]}}]}, "response": {"body": "json"}},
                {"request": {"method": "POST", "url": "/form", "formParameters": {"name": {"equalTo": "v"}}}, "response": {"body": "form"}},
                {"request": {"method": "PUT", "url": "/chunked", "bodyPatterns": [{"contains": "hello"}]}, "response": {"body": "chunked", "fixedDelayMilliseconds": 5}}
            ]}"#,
        ),
        ("__files/a.txt", "file a"),
    ]);
    let mut opts = options(dir.path());
    // Connections a mutation left half-open are closed quickly.
    opts.http.idle_timeout = Duration::from_millis(500);
    opts.http.max_body = 1024 * 1024;
    let server = decoy::server::start(opts).await.unwrap();
    let addr = server.http_addr;
    assert!(alive(addr).await);

    for (name, input) in corpus() {
        fire(addr, input.clone()).await;
        assert!(
            alive(addr).await,
            "the corpus input {name} stopped the server"
        );
    }

    let seed = std::env::var("DECOY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_DEC0_u64);
    let iterations: usize = std::env::var("DECOY_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut rng = Rng(seed);
    const BATCH: usize = 50;
    let mut sent = 0;
    while sent < iterations {
        let batch: Vec<Vec<u8>> = (0..BATCH.min(iterations - sent))
            .map(|_| {
                let base = rng.pick(SEEDS).as_bytes();
                mutate(&mut rng, base)
            })
            .collect();
        let tasks: Vec<_> = batch
            .iter()
            .map(|input| tokio::spawn(fire(addr, input.clone())))
            .collect();
        for t in tasks {
            let _ = t.await;
        }
        if !alive(addr).await {
            let kept = keep_failure(&batch, &format!("seed{seed}-at{sent}"));
            panic!(
                "after mutations {sent}..{} (seed {seed}) the server no longer answers; \
                 the batch is in {} (add the culprit to tests/fuzz-corpus/)",
                sent + batch.len(),
                kept.display()
            );
        }
        sent += batch.len();
    }
    // And the admin API still works on top.
    let mappings = get(addr, "/__admin/mappings").await;
    assert_eq!(mappings.status, 200);
    server.shutdown().await;
}
