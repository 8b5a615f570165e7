//! How long a rate-limited server asks us to wait, from wherever it says
//! so: `Retry-After` (seconds or a date), OpenAI's `retry-after-ms` and
//! `x-ratelimit-reset-*` (`1m30s`), Anthropic's `anthropic-ratelimit-*-reset`
//! (a timestamp), or the error's text ("Please try again in 20s", "resets
//! at 2026-11-24T14:05:00Z", Gemini's `"retryDelay": "37s"`).

use std::sync::LazyLock;
use std::time::Duration;

use jiff::Timestamp;
use regex::Regex;
use reqwest::header::HeaderMap;

/// The wait the answer asks for, if it names one. Reset headers count only
/// on a 429 (they come with every answer), and of them only the limits
/// that ran out when the server says which.
pub fn wait_hint(status: u16, headers: &HeaderMap, body: &str, now: Timestamp) -> Option<Duration> {
    retry_after(headers, now)
        .or_else(|| {
            (status == 429)
                .then(|| reset_headers(headers, now))
                .flatten()
        })
        .or_else(|| {
            (status == 429 || status >= 500)
                .then(|| in_text(body, now))
                .flatten()
        })
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// `retry-after-ms`, else `Retry-After` in seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap, now: Timestamp) -> Option<Duration> {
    if let Some(ms) = header(headers, "retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return seconds(ms / 1000.0);
    }
    let value = header(headers, "retry-after")?;
    match value.parse::<f64>() {
        Ok(secs) => seconds(secs),
        Err(_) => {
            let at = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
            until(at, now)
        }
    }
}

/// The latest reset among the limits that ran out (all of them when the
/// server does not say which).
fn reset_headers(headers: &HeaderMap, now: Timestamp) -> Option<Duration> {
    let mut resets: Vec<(Duration, bool)> = Vec::new();
    for (name, value) in headers {
        let name = name.as_str();
        let Ok(value) = value.to_str() else { continue };
        let (reset, remaining) = if let Some(limit) = name.strip_prefix("x-ratelimit-reset-") {
            (go_duration(value), format!("x-ratelimit-remaining-{limit}"))
        } else if let Some(limit) = name
            .strip_prefix("anthropic-ratelimit-")
            .and_then(|rest| rest.strip_suffix("-reset"))
        {
            let at = value.trim().parse::<Timestamp>().ok();
            (
                at.and_then(|at| until(at, now)),
                format!("anthropic-ratelimit-{limit}-remaining"),
            )
        } else {
            continue;
        };
        let exhausted = header(headers, &remaining).is_some_and(|left| left == "0");
        if let Some(reset) = reset {
            resets.push((reset, exhausted));
        }
    }
    let any_exhausted = resets.iter().any(|(_, exhausted)| *exhausted);
    resets
        .into_iter()
        .filter(|(_, exhausted)| *exhausted || !any_exhausted)
        .map(|(reset, _)| reset)
        .max()
}

static TRY_AGAIN_IN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:try again|retry) (?:in|after) ((?:[0-9]+(?:\.[0-9]+)?\s*(?:ms|h|m|s|seconds?|secs?|minutes?|mins?)\s*)+)").ok()
});
static RETRY_DELAY: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#""retryDelay"\s*:\s*"([0-9.]+s)""#).ok());
static RESETS_AT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)resets? (?:at|on) (\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d))",
    )
    .ok()
});

/// A wait written in the error's text.
fn in_text(body: &str, now: Timestamp) -> Option<Duration> {
    let capture = |regex: &LazyLock<Option<Regex>>| {
        let regex = regex.as_ref()?;
        Some(regex.captures(body)?.get(1)?.as_str().to_string())
    };
    if let Some(written) = capture(&TRY_AGAIN_IN).or_else(|| capture(&RETRY_DELAY)) {
        return go_duration(&written);
    }
    let at = capture(&RESETS_AT)?
        .replace(' ', "T")
        .parse::<Timestamp>()
        .ok()?;
    until(at, now)
}

/// `1h2m3.5s`, `20ms`, `6m0s`, `3 seconds`: numbers with units, added up.
fn go_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0;
    let mut rest = text.trim();
    let mut any = false;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = rest[unit_len..].trim_start();
        let scale = match unit.to_ascii_lowercase().as_str() {
            "ms" => 0.001,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * scale;
        any = true;
    }
    if any { seconds(total) } else { None }
}

fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

fn until(at: Timestamp, now: Timestamp) -> Option<Duration> {
    let millis = at.duration_since(now).as_millis();
    Some(Duration::from_millis(u64::try_from(millis.max(0)).ok()?))
}

/// The local wall-clock time `wait` from now, as the user reads it ("14:05:07").
pub fn local_time_after(wait: Duration) -> String {
    let now = jiff::Zoned::now();
    let span = jiff::SignedDuration::try_from(wait).unwrap_or(jiff::SignedDuration::ZERO);
    match now.checked_add(span) {
        Ok(then) => then.strftime("%H:%M:%S").to_string(),
        Err(_) => now.strftime("%H:%M:%S").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    fn now() -> Timestamp {
        "2026-11-24T14:00:00Z".parse().unwrap()
    }

    fn hint(status: u16, pairs: &[(&'static str, &'static str)], body: &str) -> Option<u64> {
        wait_hint(status, &headers(pairs), body, now()).map(|d| d.as_millis() as u64)
    }

    #[test]
    fn retry_after_in_seconds_milliseconds_or_as_a_date() {
        assert_eq!(hint(429, &[("retry-after", "2")], ""), Some(2000));
        assert_eq!(
            hint(429, &[("retry-after-ms", "1500"), ("retry-after", "9")], ""),
            Some(1500)
        );
        assert_eq!(
            hint(503, &[("retry-after", "Tue, 24 Nov 2026 14:05:00 GMT")], ""),
            Some(300_000)
        );
        assert_eq!(hint(429, &[], ""), None);
    }

    #[test]
    fn reset_headers_of_the_exhausted_limit_on_a_429() {
        let openai = [
            ("x-ratelimit-reset-requests", "1m30s"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
            ("x-ratelimit-remaining-tokens", "9000"),
        ];
        assert_eq!(hint(429, &openai, ""), Some(90_000));
        // On a success or another error they mean nothing.
        assert_eq!(hint(500, &openai, ""), None);
        let anthropic = [("anthropic-ratelimit-tokens-reset", "2026-11-24T14:00:03Z")];
        assert_eq!(hint(429, &anthropic, ""), Some(3000));
        assert_eq!(
            hint(429, &[("x-ratelimit-reset-tokens", "20ms")], ""),
            Some(20)
        );
    }

    #[test]
    fn waits_written_in_the_error_text() {
        let openai = r#"{"error":{"message":"Rate limit reached for gpt-4o. Please try again in 1m2.5s. Visit …"}}"#;
        assert_eq!(hint(429, &[], openai), Some(62_500));
        assert_eq!(hint(429, &[], "please retry after 3 seconds"), Some(3000));
        assert_eq!(
            hint(429, &[], r#"{"details":[{"retryDelay": "37s"}]}"#),
            Some(37_000)
        );
        assert_eq!(
            hint(
                429,
                &[],
                "usage limit reached; resets at 2026-11-24T15:00:00Z"
            ),
            Some(3_600_000)
        );
        assert_eq!(hint(400, &[], "try again in 3s"), None);
        assert_eq!(hint(429, &[], "slow down"), None);
    }

    #[test]
    fn go_durations_add_up_and_reject_unknown_units() {
        assert_eq!(go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(go_duration("2 minutes"), Some(Duration::from_secs(120)));
        assert_eq!(go_duration("3 parsecs"), None);
        assert_eq!(go_duration(""), None);
    }
}
