//! A prompt longer than the context the server loaded the model with is
//! reported in many ways: an error object inside a 200 stream (LM Studio),
//! an empty stream, a 400 or 500 that mentions the context. The agent
//! budgets for the window it was told or guessed; when the server's is
//! smaller, the fix is the config's `context_window`, so every such error
//! says the window the agent assumed and how to set it.

use super::ProviderError;

/// The sentence that ends an overflow error: the window the agent assumed
/// and how to tell it the real one.
pub fn fix(provider: &str, window: Option<u64>) -> String {
    let assumed = match window {
        Some(window) => format!("The agent assumed a window of {window} tokens"),
        None => "The agent could not tell the model's window".to_string(),
    };
    format!(
        "{assumed}; if the model is loaded with less, set context_window in [llm.providers.{provider}] to the context it is loaded with (e.g. context_window = 4096), so the agent compacts before it fills, or load the model with a larger context. "
    )
}

/// Whether a server's error message says the prompt did not fit.
pub fn mentions_overflow(detail: &str) -> bool {
    let lower = detail.to_ascii_lowercase();
    [
        "context length",
        "context size",
        "context window",
        "n_ctx",
        "maximum context",
        "context overflow",
        "context the overflows",
        "exceeds the available context",
        "prompt is too long",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// `err` told with the window the request was budgeted for, where it is
/// about the context: a server error naming the context becomes
/// [`ProviderError::ServerContextOverflow`] (not retried: the same prompt
/// would not fit the next time either).
pub fn in_window(err: ProviderError, window: Option<u64>) -> ProviderError {
    match err {
        ProviderError::EmptyStream { provider, .. } => {
            ProviderError::EmptyStream { provider, window }
        }
        ProviderError::Remote {
            provider, detail, ..
        } if mentions_overflow(&detail) => ProviderError::ServerContextOverflow {
            provider,
            detail,
            window,
        },
        ProviderError::Http {
            provider,
            status: 400 | 413 | 500,
            detail,
            ..
        } if mentions_overflow(&detail) => ProviderError::ServerContextOverflow {
            provider,
            detail,
            window,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LM_STUDIO: &str = "Trying to keep the first 6261 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input";

    #[test]
    fn server_messages_about_the_context_are_told_from_others() {
        for (detail, overflow) in [
            (LM_STUDIO, true),
            (
                "the request exceeds the available context size, try increasing it",
                true,
            ),
            ("prompt is too long: 210000 tokens > 200000 maximum", true),
            ("This model's maximum context length is 8192 tokens", true),
            ("CUDA out of memory", false),
            ("invalid grammar", false),
        ] {
            assert_eq!(mentions_overflow(detail), overflow, "{detail}");
        }
    }

    #[test]
    fn overflow_errors_say_the_window_and_the_setting() {
        let remote = ProviderError::Remote {
            provider: "lmstudio".into(),
            detail: LM_STUDIO.into(),
            transient: false,
        };
        let told = in_window(remote, Some(32768));
        assert!(matches!(told, ProviderError::ServerContextOverflow { .. }));
        let message = told.to_string();
        for says in [
            "context length of only 4096",
            "32768 tokens",
            "context_window",
            "[llm.providers.lmstudio]",
        ] {
            assert!(message.contains(says), "{says}: {message}");
        }
        let empty = ProviderError::EmptyStream {
            provider: "lmstudio".into(),
            window: None,
        };
        let message = in_window(empty, Some(8192)).to_string();
        assert!(
            message.contains("empty stream") && message.contains("8192 tokens"),
            "{message}"
        );
        // Other errors pass as they are.
        let other = ProviderError::Remote {
            provider: "p".into(),
            detail: "invalid grammar".into(),
            transient: false,
        };
        assert!(matches!(
            in_window(other, Some(1)),
            ProviderError::Remote { .. }
        ));
    }
}
