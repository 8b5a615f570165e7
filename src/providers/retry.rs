//! Retrying transient failures (seed 004): rate limits, server errors and
//! failed connections, only before the first byte of an answer could have
//! reached the user (a retry after that would show text twice), with
//! exponential backoff and jitter, honouring `Retry-After`.

use std::time::Duration;

use futures::StreamExt;

use super::settings::RetryPolicy;
use super::{ChatRequest, ErrorClass, EventStream, Provider, ProviderError};

/// Told to the user while a retry waits, so a turn is never silent.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    pub provider: String,
    /// The attempt about to be made (2 is the first retry).
    pub attempt: u32,
    pub max_attempts: u32,
    pub delay: Duration,
    pub reason: String,
    /// A rate-limit wait longer than a backoff: the local time it ends.
    pub until: Option<String>,
}

impl RetryNotice {
    pub fn message(&self) -> String {
        if let Some(until) = &self.until {
            return format!(
                "Provider `{}` is rate limited until {until} ({} from now), waiting (cancel to stop)…\n",
                self.provider,
                human_duration(self.delay)
            );
        }
        format!(
            "Provider `{}` {}; retrying in {} (attempt {} of {})…\n",
            self.provider,
            self.reason,
            human_duration(self.delay),
            self.attempt,
            self.max_attempts
        )
    }
}

fn human_duration(delay: Duration) -> String {
    if delay < Duration::from_secs(1) {
        format!("{} ms", delay.as_millis())
    } else {
        format!("{:.0} s", delay.as_secs_f64())
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    RetryAfter(Duration),
    /// The server asks for a wait longer than a backoff, but within
    /// `max_wait_secs`: sat out, cancellably, and told to the user.
    WaitLong(Duration),
    /// Not worth retrying: the error as is.
    Fail,
    /// Transient, but retrying will not help now; why, for the user.
    GiveUp(String),
}

/// Pure: the decision after `retries_done` retries failed with `err`.
/// `jitter` in `[0, 1)` spreads clients that failed together.
pub fn decide(
    policy: &RetryPolicy,
    retries_done: u32,
    err: &ProviderError,
    jitter: f64,
) -> Decision {
    match err.class() {
        ErrorClass::RateLimit | ErrorClass::ServerError | ErrorClass::Network => {}
        ErrorClass::Malformed | ErrorClass::Fatal => return Decision::Fail,
    }
    if policy.max_retries == 0 {
        return Decision::Fail;
    }
    if retries_done >= policy.max_retries {
        return Decision::GiveUp(format!("gave up after {} attempts", retries_done + 1));
    }
    let exponential = policy
        .base_delay
        .saturating_mul(2u32.saturating_pow(retries_done))
        .min(policy.max_delay);
    // Between half and all of the exponential delay.
    let backoff = exponential.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0));
    match err.retry_after() {
        Some(asked) if asked > policy.max_wait => Decision::GiveUp(format!(
            "the server asks to wait {} s, longer than max_wait_secs ({} s); try again later (from {})",
            asked.as_secs(),
            policy.max_wait.as_secs(),
            super::rate_limit::local_time_after(asked)
        )),
        Some(asked) if asked > policy.max_delay => Decision::WaitLong(asked),
        Some(asked) => Decision::RetryAfter(asked.max(backoff)),
        None => Decision::RetryAfter(backoff),
    }
}

fn reason(err: &ProviderError) -> String {
    match err {
        ProviderError::Http { status: 429, .. } => "is rate limiting requests (HTTP 429)".into(),
        ProviderError::Http { status, .. } => format!("answered HTTP {status}"),
        ProviderError::Unreachable { .. } => "cannot be reached".into(),
        ProviderError::Truncated { .. } => "dropped the connection before answering".into(),
        ProviderError::Remote { detail, .. } => format!("reported: {detail}"),
        other => other.to_string(),
    }
}

/// Start a streamed completion, retrying transient failures under the
/// provider's policy. A stream whose first item is an error has shown the
/// user nothing, so it counts as a failed start. `notify` hears about every
/// wait before it begins. Cancel by dropping the future.
pub async fn start_stream(
    provider: &dyn Provider,
    request: &ChatRequest,
    notify: &(dyn Fn(RetryNotice) + Send + Sync),
) -> Result<EventStream, ProviderError> {
    let policy = provider.config().retry;
    let mut retries_done = 0;
    loop {
        let err = match attempt(provider, request).await {
            Ok(stream) => return Ok(stream),
            Err(err) => err,
        };
        let decision = decide(&policy, retries_done, &err, fastrand::f64());
        match decision {
            Decision::Fail => return Err(err),
            Decision::GiveUp(why) => {
                return Err(ProviderError::GaveUp {
                    last: Box::new(err),
                    why,
                });
            }
            Decision::RetryAfter(delay) | Decision::WaitLong(delay) => {
                retries_done += 1;
                let long = matches!(decision, Decision::WaitLong(_));
                let notice = RetryNotice {
                    provider: provider.name().to_string(),
                    attempt: retries_done + 1,
                    max_attempts: policy.max_retries + 1,
                    delay,
                    reason: reason(&err),
                    until: long.then(|| super::rate_limit::local_time_after(delay)),
                };
                tracing::info!(provider = provider.name(), %err, ?delay, "retrying");
                notify(notice);
                tokio::time::sleep(delay).await;
            }
        }
    }
}

async fn attempt(
    provider: &dyn Provider,
    request: &ChatRequest,
) -> Result<EventStream, ProviderError> {
    let mut stream = provider.stream_chat(request.clone()).await?;
    match stream.next().await {
        Some(Err(err)) => Err(err),
        Some(Ok(first)) => Ok(futures::stream::once(async move { Ok(first) })
            .chain(stream)
            .boxed()),
        None => Ok(stream),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_wait: Duration::from_secs(600),
        }
    }

    fn http(status: u16, retry_after: Option<u64>) -> ProviderError {
        ProviderError::Http {
            provider: "p".into(),
            status,
            detail: String::new(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn only_transient_errors_are_retried() {
        let retried =
            |err: &ProviderError| matches!(decide(&policy(), 0, err, 0.0), Decision::RetryAfter(_));
        for status in [429, 500, 502, 503, 529, 408] {
            assert!(retried(&http(status, None)), "{status}");
        }
        for status in [400, 401, 403, 404, 422] {
            assert!(!retried(&http(status, None)), "{status}");
        }
        assert!(retried(&ProviderError::Unreachable {
            provider: "p".into(),
            endpoint: "e".into(),
            detail: "refused".into(),
            fix: "start it".into(),
        }));
        assert!(!retried(&ProviderError::Malformed {
            provider: "p".into(),
            detail: "x".into()
        }));
        assert!(!retried(&ProviderError::Remote {
            provider: "p".into(),
            detail: "invalid".into(),
            transient: false
        }));
        assert!(retried(&ProviderError::Remote {
            provider: "p".into(),
            detail: "Overloaded".into(),
            transient: true
        }));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_stops_at_the_limit() {
        let delay = |n, jitter| match decide(&policy(), n, &http(503, None), jitter) {
            Decision::RetryAfter(delay) => delay,
            other => panic!("{other:?}"),
        };
        assert_eq!(delay(0, 0.0), Duration::from_millis(500));
        assert_eq!(delay(0, 0.999_999).as_millis(), 999);
        assert_eq!(delay(1, 0.0), Duration::from_secs(1));
        assert_eq!(delay(2, 0.0), Duration::from_secs(2));
        assert!(matches!(
            decide(&policy(), 3, &http(503, None), 0.0),
            Decision::GiveUp(why) if why.contains("4 attempts")
        ));
        let steep = RetryPolicy {
            max_retries: 20,
            ..policy()
        };
        assert!(matches!(
            decide(&steep, 19, &http(503, None), 1.0),
            Decision::RetryAfter(d) if d <= Duration::from_secs(30)
        ));
    }

    #[test]
    fn retry_after_is_honoured_unless_too_long() {
        assert_eq!(
            decide(&policy(), 0, &http(429, Some(7)), 0.0),
            Decision::RetryAfter(Duration::from_secs(7))
        );
        assert_eq!(
            decide(&policy(), 0, &http(429, Some(300)), 0.0),
            Decision::WaitLong(Duration::from_secs(300))
        );
        assert!(matches!(
            decide(&policy(), 0, &http(429, Some(3600)), 0.0),
            Decision::GiveUp(why) if why.contains("3600 s") && why.contains("max_wait_secs")
        ));
        let off = RetryPolicy {
            max_retries: 0,
            ..policy()
        };
        assert_eq!(decide(&off, 0, &http(429, None), 0.0), Decision::Fail);
    }
}
