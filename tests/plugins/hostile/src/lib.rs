//! Misbehaves as its `mode` parameter says, so the host's sandbox can be tested:
//! `loop` spins forever, `sleep` sleeps forever (50 ms at a time, using little CPU),
//! `memory` allocates without end, `trap` executes
//! `unreachable`, `panic` panics, `status` returns status 7, `header` an invalid
//! header name, `error` returns an error value, `count` counts calls in the kv store
//! and in instance memory, `print` counts calls in the kv store and writes a line to
//! stdout, `grow` keeps 256 KiB more per call (its memory grows call after call);
//! anything else echoes the path. As a matcher, `loop`
//! spins and anything else matches when the path ends with the `suffix` parameter.

use decoy_plugin::{Context, Error, Matcher, Request, Response, Transformer};

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Params {
    mode: String,
    suffix: String,
}

#[derive(Debug)]
struct Hostile;

/// What `grow` keeps, per instance.
static HOARD: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Calls this instance has served (each instance has its own memory).
static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Transformer for Hostile {
    fn transform(ctx: &Context, req: &Request, mut resp: Response) -> Result<Response, Error> {
        let p: Params = ctx.parameters()?;
        match p.mode.as_str() {
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "sleep" => loop {
                std::thread::sleep(std::time::Duration::from_millis(50));
            },
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "trap" => std::process::abort(),
            "panic" => panic!("the hostile plugin panics on purpose"),
            "status" => {
                resp.set_status(7);
            }
            "header" => {
                resp.set_header("bad header name", "x");
            }
            "error" => return Err(Error::new("the hostile plugin refuses")),
            // The cheapest call: the response back as it came (for the benchmark).
            "noop" => {}
            "count" => {
                let shared = decoy_plugin::kv::increment("calls", 1)?;
                let mine = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                resp.set_body(format!("shared={shared} instance={mine}"));
            }
            "print" => {
                let n = decoy_plugin::kv::increment("printed", 1)?;
                println!("hostile guest: call number {n}");
                resp.set_body(format!("count={n}"));
            }
            "grow" => {
                let mut hoard = HOARD.lock().unwrap_or_else(|p| p.into_inner());
                hoard.push(vec![7u8; 256 << 10]);
                resp.set_body(format!("chunks={}", hoard.len()));
            }
            _ => {
                decoy_plugin::log::info(&format!("echo {}", req.path()));
                resp.set_body(format!("echo {}", req.path()));
            }
        }
        Ok(resp)
    }
}

impl Matcher for Hostile {
    fn matches(ctx: &Context, req: &Request) -> Result<bool, Error> {
        let p: Params = ctx.parameters()?;
        if p.mode == "loop" {
            loop {
                std::hint::black_box(());
            }
        }
        Ok(req.path().ends_with(&p.suffix))
    }
}

decoy_plugin::export!(transformer = Hostile, matcher = Hostile);
