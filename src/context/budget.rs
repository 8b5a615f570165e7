//! Token estimates and the window budget (seed 000 TokenBudget, seed 002
//! ContextBudget). Estimates start at chars/4 and are scaled by a drift
//! factor learned from the prompt tokens the provider reports.

use crate::model::{Message, Part, ToolDefinition};

/// Answer reserve when the config does not say (seed 002).
pub const DEFAULT_RESERVE_TOKENS: u64 = 4096;
/// Compaction starts when a request would pass this share of the window.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// Chars per token of the first estimate, before any usage is reported.
const CHARS_PER_TOKEN: u64 = 4;
/// Role markers and separators the chat template adds around each message.
const MESSAGE_OVERHEAD_CHARS: u64 = 16;
/// What an image costs, roughly, whatever its base64 length.
const IMAGE_CHARS: u64 = 4_000;
/// How much a new observation moves the drift factor: quick to learn, but
/// one odd call (a cached prefix, a template quirk) does not swing it alone.
const DRIFT_SMOOTHING: f64 = 0.6;

/// Raw size of a message in estimate units (chars).
pub fn message_chars(message: &Message) -> u64 {
    let parts: u64 = message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => text.len() as u64,
            Part::Thinking { text, .. } => text.len() as u64,
            Part::RedactedThinking { .. } => 0,
            Part::Image { .. } => IMAGE_CHARS,
            Part::ToolCall {
                name, arguments, ..
            } => (name.len() + arguments.len()) as u64 + MESSAGE_OVERHEAD_CHARS,
            Part::ToolResult { content, .. } => content.len() as u64 + MESSAGE_OVERHEAD_CHARS,
        })
        .sum();
    parts + MESSAGE_OVERHEAD_CHARS
}

/// Raw size of the system prompt and tool definitions.
pub fn fixed_chars(system: Option<&str>, tools: &[ToolDefinition]) -> u64 {
    let system = system.map_or(0, |s| s.len() as u64 + MESSAGE_OVERHEAD_CHARS);
    let tools: u64 = tools
        .iter()
        .map(|tool| {
            (tool.name.len() + tool.description.len() + tool.parameters.to_string().len()) as u64
                + MESSAGE_OVERHEAD_CHARS
        })
        .sum();
    system + tools
}

/// Chars → tokens, corrected by what the provider reported so far.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TokenEstimator {
    /// Reported prompt tokens / raw estimate, smoothed. 1.0 until a report.
    pub drift: f64,
    pub observations: u32,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        Self {
            drift: 1.0,
            observations: 0,
        }
    }
}

impl TokenEstimator {
    /// Tokens for `chars` raw chars.
    pub fn tokens(&self, chars: u64) -> u64 {
        let raw = chars.div_ceil(CHARS_PER_TOKEN) as f64;
        (raw * self.drift).ceil() as u64
    }

    /// Learn from one call: the request was `chars` raw chars and the
    /// provider counted `reported` prompt tokens.
    pub fn observe(&mut self, chars: u64, reported: u64) {
        let raw = chars.div_ceil(CHARS_PER_TOKEN);
        if raw == 0 || reported == 0 {
            return;
        }
        // A tokenizer is never 16× off chars/4; such a ratio is a server
        // quirk (cached prompt counted as 0…), not something to learn.
        let ratio = (reported as f64 / raw as f64).clamp(0.25, 4.0);
        self.drift = if self.observations == 0 {
            ratio
        } else {
            DRIFT_SMOOTHING * ratio + (1.0 - DRIFT_SMOOTHING) * self.drift
        };
        self.observations += 1;
    }
}

/// How much of the window a request may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextBudget {
    pub window: u64,
    /// Kept free for the answer.
    pub reserve: u64,
    /// Share of the window at which compaction starts (0–1].
    pub threshold: f64,
}

impl ContextBudget {
    /// `reserve` is capped at a quarter of the window, so a small local
    /// model (8k, even 4k) still has room for the conversation.
    pub fn new(window: u64, reserve: u64, threshold: f64) -> Self {
        Self {
            window,
            reserve: reserve.min(window / 4),
            threshold,
        }
    }

    /// The most tokens a request (system, tools and messages) may have.
    pub fn limit(&self) -> u64 {
        self.window.saturating_sub(self.reserve)
    }

    /// Above this, compact before sending.
    pub fn compact_at(&self) -> u64 {
        ((self.window as f64 * self.threshold) as u64).min(self.limit())
    }

    /// The most chars one round's tool results may take: half the room the
    /// fixed prompt leaves. A result bigger than the window would otherwise
    /// be dropped whole at the next fit, and the model would never see it.
    pub fn results_chars(&self, fixed_chars: u64) -> usize {
        let room = self
            .limit()
            .saturating_sub(fixed_chars.div_ceil(CHARS_PER_TOKEN));
        usize::try_from(room / 2 * CHARS_PER_TOKEN).unwrap_or(usize::MAX)
    }
}

/// The fewest chars a cut result keeps, however small the window.
const MIN_RESULT_CHARS: usize = 400;

/// Cut the tool results of one round to `max` chars together, each to its
/// share: the head and the tail stay, with a note of the cut between.
pub fn fit_results(parts: &mut [Part], max: usize) {
    let sizes: usize = parts.iter().map(result_len).sum();
    let results = parts.iter().filter(|p| result_len(p) > 0).count();
    if sizes <= max || results == 0 {
        return;
    }
    let share = (max / results).max(MIN_RESULT_CHARS);
    for part in parts {
        if let Part::ToolResult { content, .. } = part
            && let Some(cut) = head_and_tail(content, share)
        {
            *content = cut;
        }
    }
}

fn result_len(part: &Part) -> usize {
    match part {
        Part::ToolResult { content, .. } => content.len(),
        _ => 0,
    }
}

/// `text` in about `max` chars, or None when it fits already.
fn head_and_tail(text: &str, max: usize) -> Option<String> {
    if text.len() <= max {
        return None;
    }
    let floor = |mut at: usize| {
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let head = floor(max / 2);
    let tail = floor(text.len() - (max - max / 2));
    let cut = tail - head;
    Some(format!(
        "{}\n[... {cut} chars cut here so the result fits the model's context window; ask for less (a narrower command, a line range) to see them ...]\n{}",
        &text[..head],
        &text[tail..]
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_round_too_big_for_the_window_keeps_each_results_head_and_tail() {
        let result = |id: &str, content: String| Part::ToolResult {
            call_id: id.into(),
            content,
            is_error: false,
        };
        let big = format!("START{}END", "é".repeat(50_000));
        let mut parts = vec![result("a", big), result("b", "small".into())];
        fit_results(&mut parts, 4_000);
        let Part::ToolResult { content, .. } = &parts[0] else {
            unreachable!()
        };
        assert!(content.len() < 2_300, "{}", content.len());
        assert!(content.starts_with("START") && content.ends_with("END"));
        assert!(content.contains("chars cut here so the result fits"));
        assert!(matches!(&parts[1], Part::ToolResult { content, .. } if content == "small"));

        // Within the limit, nothing changes.
        let mut fits = vec![result("c", "x".repeat(100))];
        fit_results(&mut fits, 4_000);
        assert!(matches!(&fits[0], Part::ToolResult { content, .. } if content.len() == 100));
    }

    #[test]
    fn results_get_half_the_room_the_fixed_prompt_leaves() {
        let budget = ContextBudget {
            window: 8192,
            reserve: 4096,
            threshold: 0.8,
        };
        // 4096 tokens of limit, 1000 of them fixed: half of 3096 tokens.
        assert_eq!(budget.results_chars(4000), 1548 * 4);
        assert_eq!(budget.results_chars(100_000), 0);
    }

    use super::*;

    #[test]
    fn reserve_is_capped_for_small_windows() {
        for (window, reserve, expected_reserve, limit, compact_at) in [
            (128_000, 4096, 4096, 123_904, 102_400),
            (8192, 4096, 2048, 6144, 6144),
            (4096, 4096, 1024, 3072, 3072),
            (32_768, 1000, 1000, 31_768, 26_214),
        ] {
            let budget = ContextBudget::new(window, reserve, 0.8);
            assert_eq!(budget.reserve, expected_reserve, "window {window}");
            assert_eq!(budget.limit(), limit, "window {window}");
            assert_eq!(budget.compact_at(), compact_at, "window {window}");
        }
    }

    #[test]
    fn drift_converges_on_the_reported_ratio() {
        // The provider's tokenizer counts 1.3 tokens per chars/4 unit.
        let mut estimator = TokenEstimator::default();
        let mut errors = Vec::new();
        for chars in [400u64, 1200, 2000, 4000, 5200, 8000] {
            let reported = (chars as f64 / 4.0 * 1.3) as u64;
            let estimate = estimator.tokens(chars);
            errors.push((estimate as f64 - reported as f64).abs() / reported as f64);
            estimator.observe(chars, reported);
        }
        assert!(errors[0] > 0.2, "{errors:?}");
        assert!(errors[1] < 0.02, "{errors:?}");
        assert!(errors.iter().skip(1).all(|e| *e < 0.02), "{errors:?}");
        assert!((estimator.drift - 1.3).abs() < 0.01);
    }

    #[test]
    fn drift_smooths_noise_and_ignores_nonsense() {
        let mut estimator = TokenEstimator::default();
        for (chars, reported) in [(4000u64, 1100u64), (4000, 900), (4000, 1050), (4000, 950)] {
            estimator.observe(chars, reported);
        }
        assert!((estimator.drift - 1.0).abs() < 0.1, "{}", estimator.drift);
        estimator.observe(4000, 0);
        estimator.observe(0, 50);
        assert_eq!(estimator.observations, 4);
        estimator.observe(4000, 1_000_000);
        assert!(estimator.drift <= 4.0);
    }
}
