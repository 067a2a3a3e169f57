//! Dates for `now`, `date` and `parseDate`: Java `SimpleDateFormat` patterns,
//! WireMock's offsets (`'3 days'`, `'-1 hours'`), `epoch` and `unix` formats.

use chrono::{DateTime, Duration, FixedOffset, Months, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde_json::Value;

/// `2024-05-01T10:00:00Z` (WireMock's default rendering).
pub fn iso(d: DateTime<Utc>) -> String {
    d.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// How a helper asked for a date: the `offset`, `timezone` and `format` of its hash,
/// as text (the helper turns its values into text; this module knows only dates).
#[derive(Debug, Clone, Default)]
pub struct Style {
    pub offset: Option<String>,
    pub timezone: Option<String>,
    pub format: Option<String>,
}

/// Renders `d` as `style` says.
pub fn render(d: DateTime<Utc>, style: &Style) -> Result<Value, String> {
    let d = match &style.offset {
        Some(o) => apply_offset(d, o)?,
        None => d,
    };
    let tz = match &style.timezone {
        Some(t) => Some(timezone(t)?),
        None => None,
    };
    let format = &style.format;
    Ok(match format.as_deref() {
        Some("epoch") => Value::from(d.timestamp_millis()),
        Some("unix") => Value::from(d.timestamp()),
        Some(f) => {
            let chrono_fmt = java_to_chrono(f)?;
            let tz = tz.unwrap_or_else(|| FixedOffset::east_opt(0).expect("0 is valid"));
            Value::String(d.with_timezone(&tz).format(&chrono_fmt).to_string())
        }
        None => match tz {
            Some(tz) => Value::String(
                d.with_timezone(&tz)
                    .format("%Y-%m-%dT%H:%M:%S%:z")
                    .to_string(),
            ),
            None => Value::String(iso(d)),
        },
    })
}

/// `UTC`, `GMT`, `Z`, `+02:00`, `-0500`, `GMT+2`.
fn timezone(s: &str) -> Result<FixedOffset, String> {
    let t = s.trim();
    let rest = t
        .strip_prefix("GMT")
        .or_else(|| t.strip_prefix("UTC"))
        .unwrap_or(t);
    if rest.is_empty() || rest == "Z" {
        return FixedOffset::east_opt(0).ok_or_else(|| "bad timezone".into());
    }
    let (sign, digits) = match rest.as_bytes()[0] {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => {
            return Err(format!(
                "timezone {s:?}: only UTC offsets are known here (UTC, +02:00, -0500)"
            ));
        }
    };
    let digits: String = digits.chars().filter(|c| c.is_ascii_digit()).collect();
    let (h, m) = match digits.len() {
        1 | 2 => (digits.parse::<i32>().unwrap_or(0), 0),
        4 => (
            digits[..2].parse::<i32>().unwrap_or(0),
            digits[2..].parse::<i32>().unwrap_or(0),
        ),
        _ => return Err(format!("timezone {s:?} is not an offset")),
    };
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
        .ok_or_else(|| format!("timezone {s:?} is out of range"))
}

/// `'3 days'`, `'-1 hours'`, `'2 months'`, `'1 years'`, `'30 seconds'`.
pub fn apply_offset(d: DateTime<Utc>, offset: &str) -> Result<DateTime<Utc>, String> {
    let mut parts = offset.split_whitespace();
    let (Some(n), Some(unit), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("offset {offset:?} is not '<amount> <unit>'"));
    };
    let n: i64 = n
        .trim_start_matches('+')
        .parse()
        .map_err(|_| format!("offset {offset:?}: {n:?} is not a whole number"))?;
    let unit = unit.to_ascii_lowercase();
    let unit = unit.trim_end_matches('s');
    let out = match unit {
        "second" => d.checked_add_signed(Duration::seconds(n)),
        "minute" => d.checked_add_signed(Duration::minutes(n)),
        "hour" => d.checked_add_signed(Duration::hours(n)),
        "day" => d.checked_add_signed(Duration::days(n)),
        "week" => d.checked_add_signed(Duration::weeks(n)),
        "month" | "year" => {
            let months = if unit == "year" {
                n.saturating_mul(12)
            } else {
                n
            };
            let m =
                Months::new(u32::try_from(months.unsigned_abs()).map_err(|_| "offset too large")?);
            if months >= 0 {
                d.checked_add_months(m)
            } else {
                d.checked_sub_months(m)
            }
        }
        "millisecond" => d.checked_add_signed(Duration::milliseconds(n)),
        _ => {
            return Err(format!(
                "offset {offset:?}: unknown unit (seconds, minutes, hours, days, weeks, months, years)"
            ));
        }
    };
    out.ok_or_else(|| format!("offset {offset:?} is out of range"))
}

/// A date from a helper argument: an RFC 3339 / ISO 8601 text, a date alone, epoch
/// milliseconds, or text in the Java `format` given.
pub fn parse_value(v: &Value, format: Option<&str>) -> Result<DateTime<Utc>, String> {
    let s = match v {
        Value::Number(n) => {
            let ms = n.as_i64().ok_or("not a whole number of milliseconds")?;
            return Utc
                .timestamp_millis_opt(ms)
                .single()
                .ok_or_else(|| format!("{ms} is out of range"));
        }
        Value::String(s) => s.trim().to_owned(),
        other => return Err(format!("{other} is not a date")),
    };
    if let Some(f) = format {
        match f {
            "epoch" => {
                let ms: i64 = s
                    .parse()
                    .map_err(|_| format!("{s:?} is not epoch milliseconds"))?;
                return Utc
                    .timestamp_millis_opt(ms)
                    .single()
                    .ok_or_else(|| format!("{ms} is out of range"));
            }
            "unix" => {
                let secs: i64 = s
                    .parse()
                    .map_err(|_| format!("{s:?} is not unix seconds"))?;
                return Utc
                    .timestamp_opt(secs, 0)
                    .single()
                    .ok_or_else(|| format!("{secs} is out of range"));
            }
            _ => {}
        }
        let cf = java_to_chrono(f)?;
        if let Ok(d) = DateTime::parse_from_str(&s, &cf) {
            return Ok(d.with_timezone(&Utc));
        }
        if let Ok(d) = NaiveDateTime::parse_from_str(&s, &cf) {
            return Ok(d.and_utc());
        }
        if let Ok(d) = NaiveDate::parse_from_str(&s, &cf) {
            return Ok(d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
        }
        return Err(format!("{s:?} does not fit the format {f:?}"));
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(&s) {
        return Ok(d.with_timezone(&Utc));
    }
    if let Ok(d) = DateTime::parse_from_rfc2822(&s) {
        return Ok(d.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(&s, f) {
            return Ok(d.and_utc());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(&s, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Utc
            .timestamp_millis_opt(ms)
            .single()
            .ok_or_else(|| format!("{ms} is out of range"));
    }
    Err(format!(
        "{s:?} is not a date (use ISO 8601, or give format=)"
    ))
}

/// Java `SimpleDateFormat` letters → chrono `strftime`.
pub fn java_to_chrono(f: &str) -> Result<String, String> {
    let mut out = String::new();
    for token in decoy_datefmt::lex(f) {
        let (c, n) = match token {
            decoy_datefmt::Token::Literal(text) => {
                out.push_str(&text.replace('%', "%%"));
                continue;
            }
            decoy_datefmt::Token::Field(c, n) => (c, n),
        };
        let spec = match (c, n) {
            ('y', 2) | ('u', 2) => "%y",
            ('y', _) | ('u', _) => "%Y",
            ('M', 1) => "%-m",
            ('M', 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', 1) => "%-d",
            ('d', _) => "%d",
            ('H', 1) => "%-H",
            ('H', _) => "%H",
            ('h', 1) => "%-I",
            ('h', _) => "%I",
            ('m', 1) => "%-M",
            ('m', _) => "%M",
            ('s', 1) => "%-S",
            ('s', _) => "%S",
            ('S', 1) => "%1f",
            ('S', 2) => "%2f",
            ('S', _) => "%3f",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('a', _) => "%p",
            ('D', _) => "%j",
            ('Z', _) => "%z",
            ('X', 1) => "%#z",
            ('X', 2) => "%z",
            ('X', _) | ('x', _) => "%:z",
            ('z', _) => "%Z",
            (c, _) => {
                return Err(format!(
                    "date format {f:?}: the letter {c:?} is not supported"
                ));
            }
        };
        out.push_str(spec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_patterns_become_chrono_ones() {
        assert_eq!(
            java_to_chrono("yyyy-MM-dd'T'HH:mm:ss.SSSXXX").unwrap(),
            "%Y-%m-%dT%H:%M:%S.%3f%:z"
        );
        assert_eq!(java_to_chrono("dd/MM/yy").unwrap(), "%d/%m/%y");
        assert!(java_to_chrono("yyyy-QQ").is_err());
    }

    #[test]
    fn offsets_move_dates() {
        let d = Utc.with_ymd_and_hms(2024, 1, 31, 12, 0, 0).unwrap();
        assert_eq!(
            iso(apply_offset(d, "3 days").unwrap()),
            "2024-02-03T12:00:00Z"
        );
        assert_eq!(
            iso(apply_offset(d, "-1 hours").unwrap()),
            "2024-01-31T11:00:00Z"
        );
        assert_eq!(
            iso(apply_offset(d, "1 months").unwrap()),
            "2024-02-29T12:00:00Z"
        );
        assert!(apply_offset(d, "3 fortnights").is_err());
    }
}
