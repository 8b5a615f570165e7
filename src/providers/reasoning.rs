//! Reasoning effort: how hard a reasoning model is asked to think before it
//! answers. One level per session (the `thought_level` option), mapped onto
//! each wire format by its request builder.

/// The level a request asks for. `Off` asks for no thinking where the API
/// can say so; where it cannot (OpenAI's o-series always reason), nothing
/// is sent and the server decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reasoning {
    #[default]
    Off,
    Low,
    Medium,
    High,
}

impl Reasoning {
    pub const ALL: [Reasoning; 4] = [Self::Off, Self::Low, Self::Medium, Self::High];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.as_str() == value)
    }

    /// OpenAI's `reasoning_effort` (and Ollama's level strings); None for off.
    pub fn effort(self) -> Option<&'static str> {
        (self != Self::Off).then(|| self.as_str())
    }

    /// Anthropic's `thinking.budget_tokens` (1024 is the API's minimum).
    pub fn thinking_budget(self) -> Option<u32> {
        match self {
            Self::Off => None,
            Self::Low => Some(1024),
            Self::Medium => Some(4096),
            Self::High => Some(16_384),
        }
    }
}

/// Model families known to reason (and to take a reasoning parameter),
/// matched like [`super::known_models::context_window`]: without a
/// `provider/` prefix or `:tag`, by prefix.
const REASONING_FAMILIES: &[&str] = &[
    // OpenAI
    "o1",
    "o3",
    "o4-mini",
    "gpt-5",
    "codex-mini",
    "gpt-oss",
    // Anthropic (extended thinking)
    "claude-3-7",
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-haiku-4",
    "claude-4",
    // Open-weight thinking models
    "qwen3",
    "qwq",
    "deepseek-r1",
    "magistral",
    "phi4-reasoning",
    "phi4-mini-reasoning",
    "cogito",
];

/// Whether `model` belongs to a family known to reason.
pub fn known_to_reason(model: &str) -> bool {
    let base = model.rsplit('/').next().unwrap_or(model);
    let base = base.split(':').next().unwrap_or(base).to_ascii_lowercase();
    // `gpt-5-chat` is the non-reasoning variant; `o1-mini`-style names match `o1`.
    if base.starts_with("gpt-5-chat") {
        return false;
    }
    REASONING_FAMILIES
        .iter()
        .any(|family| base.starts_with(family))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_round_trip_and_map_per_api() {
        for level in Reasoning::ALL {
            assert_eq!(Reasoning::parse(level.as_str()), Some(level));
        }
        assert_eq!(Reasoning::parse("max"), None);
        assert_eq!(Reasoning::Off.effort(), None);
        assert_eq!(Reasoning::High.effort(), Some("high"));
        assert_eq!(Reasoning::Off.thinking_budget(), None);
        assert!(Reasoning::Low.thinking_budget() >= Some(1024));
    }

    #[test]
    fn reasoning_families_are_known_and_others_are_not() {
        for model in [
            "o3-mini",
            "gpt-5-mini",
            "claude-sonnet-4-5-20250929",
            "anthropic/claude-3-7-sonnet",
            "qwen3:8b",
            "deepseek-r1:14b",
            "gpt-oss:20b",
        ] {
            assert!(known_to_reason(model), "{model}");
        }
        for model in [
            "gpt-4o",
            "claude-3-5-sonnet",
            "llama3.2:3b",
            "qwen2.5-coder",
            "gpt-5-chat-latest",
        ] {
            assert!(!known_to_reason(model), "{model}");
        }
    }
}
