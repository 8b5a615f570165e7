//! Small helpers every layer may use (std only).

use std::error::Error;
use std::sync::{Mutex, MutexGuard};

/// An error and its sources on one line, without repeating a source its
/// parent already quotes (a top-level message alone, e.g. reqwest's, is vague).
pub fn error_chain(err: &dyn Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Locks `mutex`, also after a thread panicked while holding it: the data
/// guarded here stays usable (a panic elsewhere must not take the agent down).
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Resolves when any of `tokens` is cancelled; never, when there is none.
pub async fn any_cancelled<'a>(
    tokens: impl IntoIterator<Item = &'a tokio_util::sync::CancellationToken>,
) {
    let cancels: Vec<_> = (tokens.into_iter())
        .map(|token| Box::pin(token.cancelled()))
        .collect();
    if cancels.is_empty() {
        return std::future::pending().await;
    }
    futures::future::select_all(cancels).await;
}

/// Reads `lock`, also after a thread panicked while writing it (as [`lock`]).
pub fn lock_read<T>(lock: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poison| poison.into_inner())
}

/// Crucible's user config directory: `$XDG_CONFIG_HOME/crucible`, else
/// `~/.config/crucible`.
pub fn crucible_config_dir() -> Option<std::path::PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::PathBuf::from(home).join(".config"))
        })?;
    Some(config.join("crucible"))
}

/// The nearest directory at or above `start` holding `.crucible/`, short
/// of the home directory (whose `.crucible/` is Crucible's data, not a
/// project).
pub fn project_root(start: &std::path::Path) -> Option<std::path::PathBuf> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    start
        .ancestors()
        .take_while(|dir| Some(*dir) != home.as_deref())
        .find(|dir| dir.join(".crucible").is_dir())
        .map(std::path::Path::to_path_buf)
}

/// `at` as RFC 3339 UTC with milliseconds: fixed width, so it sorts as text.
pub fn rfc3339(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// Now as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// `at`'s date (UTC) as YYYY-MM-DD.
pub fn date(at: std::time::SystemTime) -> String {
    let mut text = rfc3339(at);
    text.truncate("YYYY-MM-DD".len());
    text
}

/// `text` trimmed and cut to at most `max` bytes (on a character boundary),
/// marked with `…` when cut: for error bodies shown to the user.
pub fn truncate(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let middle: Vec<&str> = parts.collect();
    let Some((last, between)) = middle.split_last() else {
        return rest.is_empty();
    };
    for part in between {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_of_any_characters() {
        assert!(glob_matches("a*b*c", "a-x-b-y-c"));
        assert!(!glob_matches("a*b*c", "a-c"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exactly"));
        assert!(glob_matches("*KEY*", "MY_KEY_ID"));
    }

    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "could not read: {}", self.0)
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[derive(Debug)]
    struct Outer(Wrapped);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("request failed")
        }
    }

    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn error_chains_skip_repeated_causes() {
        let err = Outer(Wrapped(std::io::Error::other("connection refused")));
        assert_eq!(
            error_chain(&err),
            "request failed: could not read: connection refused"
        );
    }

    #[test]
    fn a_poisoned_lock_still_opens() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let held = mutex.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock();
            panic!("poisons the lock");
        })
        .join();
        assert!(mutex.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(*lock(&mutex), 2);
    }

    fn at(millis: u64) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis)
    }

    #[test]
    fn timestamps_are_rfc3339_and_dates_their_day() {
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_782_400_123)), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(at(1_795_000_000_000)), "2026-11-18T11:06:40.000Z");
        assert_eq!(date(at(0)), "1970-01-01");
        assert_eq!(date(at(11_016 * 86_400_000)), "2000-02-29");
        assert_eq!(date(at(20_780 * 86_400_000 + 86_399_999)), "2026-11-23");
    }
}
