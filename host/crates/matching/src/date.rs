//! `before`, `after` and `equalToDateTime`, with WireMock's `now +3 days` offsets,
//! `expectedOffset`/`expectedOffsetUnit`, `actualFormat` and truncations.

use chrono::{
    DateTime, Datelike, Duration, Months, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc,
};
use serde_json::{Map, Value};

use decoy_spec::fields::{FieldError, FieldResult, as_bool, as_i64, as_str, join};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Before,
    After,
    Equal,
}

#[derive(Debug, Clone)]
enum Expected {
    /// "now" plus an offset, evaluated at match time.
    Now,
    At(DateTime<Utc>),
}

#[derive(Debug, Clone, Copy)]
enum Unit {
    Seconds,
    Minutes,
    Hours,
    Days,
    Months,
    Years,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truncation {
    FirstMinuteOfHour,
    FirstHourOfDay,
    FirstDayOfMonth,
    FirstDayOfNextMonth,
    LastDayOfMonth,
    FirstDayOfYear,
    FirstDayOfNextYear,
    LastDayOfYear,
}

#[derive(Debug, Clone)]
enum ActualFormat {
    /// A Java `DateTimeFormatter` pattern, translated to a chrono format string.
    Pattern {
        chrono: String,
        has_zone: bool,
        has_time: bool,
    },
    UnixSeconds,
    EpochMillis,
}

#[derive(Debug, Clone)]
pub struct DateTimePattern {
    op: Op,
    raw: String,
    expected: Expected,
    offset: Option<(i64, Unit)>,
    actual_format: Option<ActualFormat>,
    truncate_expected: Option<Truncation>,
    truncate_actual: Option<Truncation>,
}

impl DateTimePattern {
    pub fn parse(
        op: &str,
        value: &Value,
        obj: &Map<String, Value>,
        path: &str,
    ) -> FieldResult<Self> {
        let vpath = join(path, op);
        let raw = as_str(value, &vpath)?.trim().to_owned();
        let op = match op {
            "before" => Op::Before,
            "after" => Op::After,
            _ => Op::Equal,
        };
        let (expected, mut offset) = parse_expected(&raw).ok_or_else(|| {
            FieldError::new(
                &vpath,
                format!(
                    "cannot read {raw:?} as a date-time; use ISO 8601 (2021-06-01T10:00:00Z) or \"now\" with an optional offset such as \"now +3 days\""
                ),
            )
        })?;
        if let Some(amount) = obj.get("expectedOffset") {
            let apath = join(path, "expectedOffset");
            let amount = as_i64(amount, &apath)?;
            let unit = match obj.get("expectedOffsetUnit") {
                Some(u) => {
                    let upath = join(path, "expectedOffsetUnit");
                    parse_unit(as_str(u, &upath)?).ok_or_else(|| {
                        FieldError::new(
                            &upath,
                            "expected seconds, minutes, hours, days, months or years",
                        )
                    })?
                }
                None => Unit::Days,
            };
            offset = Some((amount, unit));
        }
        let truncation = |key: &str| -> FieldResult<Option<Truncation>> {
            obj.get(key)
                .map(|v| {
                    let tpath = join(path, key);
                    parse_truncation(as_str(v, &tpath)?).ok_or_else(|| {
                        FieldError::new(
                            &tpath,
                            "expected one of: first minute of hour, first hour of day, first day of month, first day of next month, last day of month, first day of year, first day of next year, last day of year",
                        )
                    })
                })
                .transpose()
        };
        if let Some(v) = obj.get("applyTruncationLast") {
            as_bool(v, &join(path, "applyTruncationLast"))?;
        }
        let actual_format = match obj.get("actualFormat") {
            Some(v) => Some(parse_actual_format(as_str(v, &join(path, "actualFormat"))?)),
            None => None,
        };
        Ok(DateTimePattern {
            op,
            raw,
            expected,
            offset,
            actual_format,
            truncate_expected: truncation("truncateExpected")?,
            truncate_actual: truncation("truncateActual")?,
        })
    }

    pub fn matches(&self, actual: &str) -> bool {
        let Some(mut actual) = self.read_actual(actual) else {
            return false;
        };
        let mut expected = match self.expected {
            Expected::Now => Utc::now(),
            Expected::At(t) => t,
        };
        if let Some((n, unit)) = self.offset {
            match add(expected, n, unit) {
                Some(t) => expected = t,
                None => return false,
            }
        }
        if let Some(t) = self.truncate_expected {
            expected = truncate(expected, t);
        }
        if let Some(t) = self.truncate_actual {
            actual = truncate(actual, t);
        }
        match self.op {
            Op::Before => actual < expected,
            Op::After => actual > expected,
            Op::Equal => actual == expected,
        }
    }

    pub fn describe(&self) -> String {
        let op = match self.op {
            Op::Before => "before",
            Op::After => "after",
            Op::Equal => "equalToDateTime",
        };
        format!("[{op}] {}", self.raw)
    }

    fn read_actual(&self, s: &str) -> Option<DateTime<Utc>> {
        let s = s.trim();
        match &self.actual_format {
            None => parse_date_time(s),
            Some(ActualFormat::UnixSeconds) => Utc.timestamp_opt(s.parse().ok()?, 0).single(),
            Some(ActualFormat::EpochMillis) => Utc.timestamp_millis_opt(s.parse().ok()?).single(),
            Some(ActualFormat::Pattern {
                chrono,
                has_zone,
                has_time,
            }) => {
                if *has_zone {
                    DateTime::parse_from_str(s, chrono)
                        .ok()
                        .map(|t| t.with_timezone(&Utc))
                } else if *has_time {
                    NaiveDateTime::parse_from_str(s, chrono)
                        .ok()
                        .map(|t| t.and_utc())
                } else {
                    NaiveDate::parse_from_str(s, chrono)
                        .ok()
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                        .map(|t| t.and_utc())
                }
            }
        }
    }
}

fn parse_expected(raw: &str) -> Option<(Expected, Option<(i64, Unit)>)> {
    let lower = raw.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("now") {
        let rest = rest.trim();
        if rest.is_empty() {
            return Some((Expected::Now, None));
        }
        let mut words = rest.split_whitespace();
        let amount: i64 = words.next()?.trim_start_matches('+').parse().ok()?;
        let unit = parse_unit(words.next()?)?;
        if words.next().is_some() {
            return None;
        }
        return Some((Expected::Now, Some((amount, unit))));
    }
    parse_date_time(raw).map(|t| (Expected::At(t), None))
}

fn parse_unit(s: &str) -> Option<Unit> {
    Some(match s.to_ascii_lowercase().trim_end_matches('s') {
        "second" => Unit::Seconds,
        "minute" => Unit::Minutes,
        "hour" => Unit::Hours,
        "day" => Unit::Days,
        "month" => Unit::Months,
        "year" => Unit::Years,
        _ => return None,
    })
}

fn parse_truncation(s: &str) -> Option<Truncation> {
    Some(match s.to_ascii_lowercase().replace('_', " ").as_str() {
        "first minute of hour" => Truncation::FirstMinuteOfHour,
        "first hour of day" => Truncation::FirstHourOfDay,
        "first day of month" => Truncation::FirstDayOfMonth,
        "first day of next month" => Truncation::FirstDayOfNextMonth,
        "last day of month" => Truncation::LastDayOfMonth,
        "first day of year" => Truncation::FirstDayOfYear,
        "first day of next year" => Truncation::FirstDayOfNextYear,
        "last day of year" => Truncation::LastDayOfYear,
        _ => return None,
    })
}

fn add(t: DateTime<Utc>, n: i64, unit: Unit) -> Option<DateTime<Utc>> {
    let months = |m: i64| {
        let m32 = u32::try_from(m.unsigned_abs()).ok()?;
        if m >= 0 {
            t.checked_add_months(Months::new(m32))
        } else {
            t.checked_sub_months(Months::new(m32))
        }
    };
    match unit {
        Unit::Seconds => t.checked_add_signed(Duration::try_seconds(n)?),
        Unit::Minutes => t.checked_add_signed(Duration::try_minutes(n)?),
        Unit::Hours => t.checked_add_signed(Duration::try_hours(n)?),
        Unit::Days => t.checked_add_signed(Duration::try_days(n)?),
        Unit::Months => months(n),
        Unit::Years => months(n.checked_mul(12)?),
    }
}

fn truncate(t: DateTime<Utc>, how: Truncation) -> DateTime<Utc> {
    let day_start = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(|x| x.and_utc()).unwrap_or(t);
    let d = t.date_naive();
    let first_of_month = d.with_day(1).unwrap_or(d);
    let next_month = first_of_month
        .checked_add_months(Months::new(1))
        .unwrap_or(first_of_month);
    let first_of_year = NaiveDate::from_ymd_opt(d.year(), 1, 1).unwrap_or(d);
    let next_year = NaiveDate::from_ymd_opt(d.year() + 1, 1, 1).unwrap_or(d);
    match how {
        Truncation::FirstMinuteOfHour => t
            .with_minute(0)
            .and_then(|x| x.with_second(0))
            .and_then(|x| x.with_nanosecond(0))
            .unwrap_or(t),
        Truncation::FirstHourOfDay => day_start(d),
        Truncation::FirstDayOfMonth => day_start(first_of_month),
        Truncation::FirstDayOfNextMonth => day_start(next_month),
        Truncation::LastDayOfMonth => day_start(next_month.pred_opt().unwrap_or(d)),
        Truncation::FirstDayOfYear => day_start(first_of_year),
        Truncation::FirstDayOfNextYear => day_start(next_year),
        Truncation::LastDayOfYear => day_start(next_year.pred_opt().unwrap_or(d)),
    }
}

/// ISO 8601 with or without offset (no offset means UTC), a bare date, or RFC 1123 /
/// RFC 2822 (`Tue, 01 Jun 2021 15:16:17 GMT`, as in HTTP `Date` headers).
pub fn parse_date_time(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(t.and_utc());
        }
    }
    if let Ok(t) = DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z") {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return d.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
    }
    let rfc = s.replace(" GMT", " +0000").replace(" UTC", " +0000");
    DateTime::parse_from_rfc2822(&rfc)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Translates the common letters of a Java `DateTimeFormatter` pattern.
fn parse_actual_format(java: &str) -> ActualFormat {
    match java {
        "unix" => return ActualFormat::UnixSeconds,
        "epoch" => return ActualFormat::EpochMillis,
        _ => {}
    }
    let mut out = String::new();
    let (mut has_zone, mut has_time) = (false, false);
    for token in decoy_datefmt::lex(java) {
        let (c, n) = match token {
            decoy_datefmt::Token::Literal(text) => {
                out.push_str(&text.replace('%', "%%"));
                continue;
            }
            decoy_datefmt::Token::Field(c, n) => (c, n),
        };
        let piece = match (c, n) {
            ('y' | 'u', 2) => "%y",
            ('y' | 'u', _) => "%Y",
            ('M', 1 | 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', _) => "%d",
            ('E', 4..) => "%A",
            ('E', _) => "%a",
            ('H', _) => {
                has_time = true;
                "%H"
            }
            ('h', _) => {
                has_time = true;
                "%I"
            }
            ('a', _) => "%p",
            ('m', _) => "%M",
            ('s', _) => "%S",
            ('S', _) => "%.f",
            ('Z', _) | ('x', _) => {
                has_zone = true;
                "%z"
            }
            ('X', _) | ('z', _) | ('O', _) => {
                has_zone = true;
                "%#z"
            }
            _ => {
                out.extend(std::iter::repeat_n(c, n));
                continue;
            }
        };
        // `.SSS` in Java is a literal dot then fraction; chrono's `%.f` includes the dot.
        if piece == "%.f" && out.ends_with('.') {
            out.pop();
        }
        out.push_str(piece);
    }
    ActualFormat::Pattern {
        chrono: out,
        has_zone,
        has_time,
    }
}

#[cfg(test)]
mod tests {
    use crate::pattern::{Actual, StringPattern};
    use serde_json::{Value, json};

    fn m(v: Value, actual: &str) -> bool {
        StringPattern::parse(&v, "h")
            .unwrap()
            .matches(&Actual::new(actual))
    }

    #[test]
    fn compares_absolute_instants() {
        assert!(m(
            json!({"before": "2021-06-01T00:00:00Z"}),
            "2021-05-31T23:59:59Z"
        ));
        assert!(!m(
            json!({"before": "2021-06-01T00:00:00Z"}),
            "2021-06-01T00:00:01Z"
        ));
        assert!(m(
            json!({"after": "2021-06-01"}),
            "Tue, 01 Jun 2021 15:16:17 GMT"
        ));
        assert!(m(
            json!({"equalToDateTime": "2021-06-01T12:00:00Z"}),
            "2021-06-01T14:00:00+02:00"
        ));
    }

    #[test]
    fn now_with_offsets_is_evaluated_at_match_time() {
        assert!(m(
            json!({"after": "now -1 days"}),
            &chrono::Utc::now().to_rfc3339()
        ));
        assert!(m(
            json!({"before": "now +3 years"}),
            &(chrono::Utc::now() + chrono::Duration::days(365)).to_rfc3339()
        ));
        assert!(!m(
            json!({"before": "now +3 years"}),
            &(chrono::Utc::now() + chrono::Duration::days(4 * 366)).to_rfc3339()
        ));
        assert!(m(
            json!({"before": "now", "expectedOffset": 10, "expectedOffsetUnit": "years"}),
            &(chrono::Utc::now() + chrono::Duration::days(9 * 365)).to_rfc3339()
        ));
    }

    #[test]
    fn reads_actual_values_in_a_java_format() {
        assert!(m(
            json!({"equalToDateTime": "2021-06-24T00:00:00Z", "actualFormat": "dd/MM/yyyy"}),
            "24/06/2021"
        ));
        assert!(m(
            json!({"equalToDateTime": "2021-06-24T00:00:00Z", "actualFormat": "unix"}),
            "1624492800"
        ));
    }

    #[test]
    fn truncates_before_comparing() {
        assert!(m(
            json!({"equalToDateTime": "2021-06-01T00:00:00Z", "truncateActual": "first day of month"}),
            "2021-06-17T10:11:12Z"
        ));
    }

    #[test]
    fn rejects_unreadable_expected_values() {
        let e = StringPattern::parse(&json!({"before": "yesterday-ish"}), "h").unwrap_err();
        assert_eq!(e.path, "h.before");
    }
}
