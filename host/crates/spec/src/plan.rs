//! The transport-neutral answer to a request, and the delay and fault vocabulary.
//!
//! The engine never writes to a socket. It returns a [`ResponsePlan`]: what to send,
//! how long to wait first, whether to dribble the body, or which fault to simulate.
//! The HTTP transport carries the plan out with timers (never a blocked thread); a
//! message transport can reuse the same plan for a reply message.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use rand_distr::Distribution;
use serde_json::Value;

use crate::fields::{
    FieldError, FieldResult, Fields as _, as_f64, as_object, as_str, as_u64, join,
};

/// The longest delay decoy waits before answering (one hour). Every sampled delay is
/// capped here, and so is the total of a mapping's fixed delay, its distribution and
/// the global settings ([`add_delay`]): a distribution's tail (a lognormal with a
/// large `sigma`) can neither hold a connection for days nor overflow a `Duration`.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// The largest `sigma` a lognormal delay may have. With `sigma` 10 one sample in six
/// is already 20,000 times the median or more; beyond it a distribution describes
/// nothing a test could want, so a mapping asking for more is rejected at load.
pub const MAX_LOGNORMAL_SIGMA: f64 = 10.0;

/// `a + b`, capped at [`MAX_DELAY`] (never an overflow).
pub fn add_delay(a: Duration, b: Duration) -> Duration {
    a.saturating_add(b).min(MAX_DELAY)
}

/// WireMock's `delayDistribution`.
#[derive(Debug, Clone, PartialEq)]
pub enum DelayDistribution {
    /// `median * e^(sigma * N(0,1))`, capped at `max` when given.
    LogNormal {
        median: f64,
        sigma: f64,
        max: Option<f64>,
    },
    Uniform {
        lower: u64,
        upper: u64,
    },
    Fixed {
        milliseconds: u64,
    },
}

impl DelayDistribution {
    /// Checks the parameters (the mapping loader calls it): every number finite,
    /// lognormal `median` above 0 and at most [`MAX_DELAY`], `sigma` between 0 and
    /// [`MAX_LOGNORMAL_SIGMA`], `maxValue` not negative, uniform `lower` at most
    /// `upper`. The error names the field (`median`, `sigma`, ...) and the reason.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let max_ms = MAX_DELAY.as_millis() as f64;
        match *self {
            DelayDistribution::LogNormal { median, sigma, max } => {
                if !median.is_finite() || median <= 0.0 || median > max_ms {
                    return Err((
                        "median",
                        format!(
                            "must be above 0 and at most {max_ms} (milliseconds: decoy's delay limit is one hour), found {median}"
                        ),
                    ));
                }
                if !sigma.is_finite() || !(0.0..=MAX_LOGNORMAL_SIGMA).contains(&sigma) {
                    return Err((
                        "sigma",
                        format!("must be between 0 and {MAX_LOGNORMAL_SIGMA}, found {sigma}"),
                    ));
                }
                if let Some(m) = max
                    && (m.is_nan() || m < 0.0)
                {
                    return Err(("maxValue", format!("must be 0 or more, found {m}")));
                }
                Ok(())
            }
            DelayDistribution::Uniform { lower, upper } if lower > upper => Err((
                "lower",
                format!("must not exceed upper ({lower} > {upper})"),
            )),
            _ => Ok(()),
        }
    }

    /// One delay, never more than [`MAX_DELAY`] (whatever the parameters: a sample
    /// that is not a finite number of milliseconds counts as the limit).
    pub fn sample(&self) -> Duration {
        let mut rng = rand::rng();
        let ms = match *self {
            DelayDistribution::Fixed { milliseconds } => milliseconds as f64,
            DelayDistribution::Uniform { lower, upper } => {
                rand_distr::Uniform::new_inclusive(lower, upper)
                    .map(|d| d.sample(&mut rng) as f64)
                    .unwrap_or(lower as f64)
            }
            DelayDistribution::LogNormal { median, sigma, max } => {
                let v = rand_distr::LogNormal::new(median.ln(), sigma)
                    .map(|d| d.sample(&mut rng))
                    .unwrap_or(median);
                max.map_or(v, |m| v.min(m))
            }
        };
        capped_millis(ms)
    }
}

/// Reads a `delayDistribution` object: a stub's, a webhook's, an MQ reply's, or the
/// global delay setting's. The error names the field under `path` and the reason.
pub fn parse_distribution(v: &Value, path: &str) -> FieldResult<DelayDistribution> {
    let o = as_object(v, path)?;
    let ty = as_str(
        o.field("type").ok_or_else(|| {
            FieldError::new(path, "missing \"type\" (lognormal, uniform or fixed)")
        })?,
        &join(path, "type"),
    )?;
    let num = |k: &str| {
        o.field(k)
            .ok_or_else(|| FieldError::new(path, format!("a {ty} distribution needs \"{k}\"")))
            .and_then(|v| as_f64(v, &join(path, k)))
    };
    let int = |k: &str| {
        o.field(k)
            .ok_or_else(|| FieldError::new(path, format!("a {ty} distribution needs \"{k}\"")))
            .and_then(|v| as_u64(v, &join(path, k)))
    };
    let dist = match ty {
        "lognormal" => {
            let median = num("median")?;
            let sigma = num("sigma")?;
            let max = match o.field("maxValue") {
                Some(m) => Some(as_f64(m, &join(path, "maxValue"))?),
                None => None,
            };
            DelayDistribution::LogNormal { median, sigma, max }
        }
        "uniform" => DelayDistribution::Uniform {
            lower: int("lower")?,
            upper: int("upper")?,
        },
        "fixed" => DelayDistribution::Fixed {
            milliseconds: int("milliseconds")?,
        },
        other => {
            return Err(FieldError::new(
                join(path, "type"),
                format!("unknown distribution {other:?}; expected lognormal, uniform or fixed"),
            ));
        }
    };
    dist.validate()
        .map_err(|(field, reason)| FieldError::new(join(path, field), reason))?;
    Ok(dist)
}

/// `ms` milliseconds as a `Duration` within `0..=MAX_DELAY`; NaN and infinity (a
/// lognormal sample that overflowed) count as the limit.
fn capped_millis(ms: f64) -> Duration {
    let max_ms = MAX_DELAY.as_secs_f64() * 1000.0;
    if ms.is_nan() || ms >= max_ms {
        return MAX_DELAY;
    }
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// WireMock's `chunkedDribbleDelay`: the body in `chunks` pieces spread over `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkedDribble {
    pub chunks: u32,
    pub total: Duration,
}

/// WireMock's `fault` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Close the connection with a TCP reset.
    ConnectionResetByPeer,
    /// Close the connection without sending anything.
    EmptyResponse,
    /// Send a `200` with a chunked body whose first chunk is garbage, then close.
    MalformedResponseChunk,
    /// Send random bytes, then close.
    RandomDataThenClose,
}

impl Fault {
    pub const NAMES: &'static [&'static str] = &[
        "CONNECTION_RESET_BY_PEER",
        "EMPTY_RESPONSE",
        "MALFORMED_RESPONSE_CHUNK",
        "RANDOM_DATA_THEN_CLOSE",
    ];

    pub fn from_name(s: &str) -> Option<Fault> {
        Some(match s {
            "CONNECTION_RESET_BY_PEER" => Fault::ConnectionResetByPeer,
            "EMPTY_RESPONSE" => Fault::EmptyResponse,
            "MALFORMED_RESPONSE_CHUNK" => Fault::MalformedResponseChunk,
            "RANDOM_DATA_THEN_CLOSE" => Fault::RandomDataThenClose,
            _ => return None,
        })
    }
}

/// `proxyBaseUrl` and its companions (WireMock's proxy stubs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySpec {
    /// Without a trailing `/`; the request's URL is appended.
    pub base_url: String,
    pub prefix_to_remove: Option<String>,
    pub add_headers: Vec<(HeaderName, HeaderValue)>,
    pub remove_headers: Vec<HeaderName>,
}

impl ProxySpec {
    /// The upstream URL for a request to `url` (path and query).
    pub fn target(&self, url: &str) -> String {
        let url = match &self.prefix_to_remove {
            Some(p) if !p.is_empty() => url.strip_prefix(p.as_str()).unwrap_or(url),
            _ => url,
        };
        format!("{}{}", self.base_url, url)
    }
}

/// What to answer, decided by the engine and carried out by a transport.
#[derive(Debug, Clone)]
pub struct ResponsePlan {
    pub status: u16,
    pub status_message: Option<Arc<str>>,
    /// Shared with the mapping: building a plan copies no header.
    pub headers: Arc<[(HeaderName, HeaderValue)]>,
    pub body: Bytes,
    /// Wait this long before sending anything.
    pub delay: Duration,
    pub dribble: Option<ChunkedDribble>,
    pub fault: Option<Fault>,
    /// Forward the request to a real service; the other fields are then unused
    /// except `delay`.
    pub proxy: Option<Arc<ProxySpec>>,
}

/// A plain-text plan (used for reports and errors).
pub fn text_plan(status: u16, body: String) -> ResponsePlan {
    ResponsePlan {
        status,
        status_message: None,
        headers: Arc::from(vec![(
            HeaderName::from_static("content-type"),
            HeaderValue::from_static("text/plain;charset=UTF-8"),
        )]),
        body: Bytes::from(body),
        delay: std::time::Duration::ZERO,
        dribble: None,
        fault: None,
        proxy: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn delay_distributions_are_validated() {
        let e = parse_distribution(&json!({"type": "lognormal", "median": 80}), "d").unwrap_err();
        assert!(e.reason.contains("sigma"));
        let e = parse_distribution(&json!({"type": "gamma"}), "d").unwrap_err();
        assert_eq!(e.path, "d.type");
        let e = parse_distribution(
            &json!({"type": "lognormal", "median": 80, "sigma": 1000}),
            "d",
        )
        .unwrap_err();
        assert_eq!(e.path, "d.sigma");
        let e = parse_distribution(
            &json!({"type": "lognormal", "median": 1e300, "sigma": 0.1}),
            "d",
        )
        .unwrap_err();
        assert_eq!(e.path, "d.median");
        assert!(e.reason.contains("delay limit"), "{}", e.reason);
        let e = parse_distribution(&json!({"type": "uniform", "lower": 9, "upper": 5}), "d")
            .unwrap_err();
        assert_eq!(e.path, "d.lower");
        let e = parse_distribution(&json!({"type": "gamma"}), "d").unwrap_err();
        assert_eq!(e.path, "d.type");
        assert_eq!(
            parse_distribution(&json!({"type": "uniform", "lower": 1, "upper": 5}), "d").unwrap(),
            DelayDistribution::Uniform { lower: 1, upper: 5 }
        );
    }

    #[test]
    fn lognormal_delays_respect_the_cap_and_centre_on_the_median() {
        let d = DelayDistribution::LogNormal {
            median: 50.0,
            sigma: 0.5,
            max: Some(120.0),
        };
        let mut samples: Vec<f64> = (0..4000)
            .map(|_| d.sample().as_secs_f64() * 1000.0)
            .collect();
        samples.sort_by(f64::total_cmp);
        assert!(samples.iter().all(|s| *s <= 120.0 + 1e-9));
        let median = samples[samples.len() / 2];
        assert!((40.0..60.0).contains(&median), "median {median}");
    }

    #[test]
    fn absurd_lognormal_parameters_sample_at_most_the_delay_limit() {
        for (median, sigma) in [
            (50.0, 1000.0),
            (1e300, 0.5),
            (1e300, 1000.0),
            (f64::MAX, 3.0),
        ] {
            let d = DelayDistribution::LogNormal {
                median,
                sigma,
                max: None,
            };
            for _ in 0..200 {
                assert!(d.sample() <= MAX_DELAY, "median {median} sigma {sigma}");
            }
        }
        assert_eq!(capped_millis(f64::NAN), MAX_DELAY);
        assert_eq!(capped_millis(f64::INFINITY), MAX_DELAY);
        assert_eq!(capped_millis(-5.0), Duration::ZERO);
        assert_eq!(add_delay(Duration::MAX, Duration::MAX), MAX_DELAY);
    }

    #[test]
    fn validation_names_the_absurd_field() {
        let lognormal = |median, sigma| DelayDistribution::LogNormal {
            median,
            sigma,
            max: None,
        };
        assert_eq!(lognormal(50.0, 1000.0).validate().unwrap_err().0, "sigma");
        assert_eq!(lognormal(1e300, 0.5).validate().unwrap_err().0, "median");
        assert_eq!(lognormal(f64::NAN, 0.5).validate().unwrap_err().0, "median");
        assert!(lognormal(90.0, 0.1).validate().is_ok());
    }

    #[test]
    fn uniform_delays_stay_in_bounds() {
        let d = DelayDistribution::Uniform {
            lower: 10,
            upper: 20,
        };
        for _ in 0..1000 {
            let ms = d.sample().as_millis();
            assert!((10..=20).contains(&ms), "{ms}");
        }
    }
}
