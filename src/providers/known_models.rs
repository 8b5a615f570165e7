//! Context windows of well-known model families, for servers that do not
//! report one (OpenAI's and Anthropic's model lists do not). Matched on the
//! model id without any `provider/` prefix (OpenRouter) or `:tag` (Ollama);
//! the first matching prefix wins, so longer prefixes come first.

const TABLE: &[(&str, u64)] = &[
    // OpenAI
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("codex-mini", 200_000),
    // Anthropic
    ("claude", 200_000),
    // Open-weight families, at the window they were trained for
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3.3", 131_072),
    ("llama-3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama-3.3", 131_072),
    ("llama3", 8_192),
    ("qwen2.5-coder", 32_768),
    ("qwen2.5", 32_768),
    ("qwen3-coder", 262_144),
    ("qwen3", 40_960),
    ("mistral-nemo", 131_072),
    ("mistral-small", 32_768),
    ("mistral", 32_768),
    ("codestral", 32_768),
    ("deepseek-r1", 131_072),
    ("deepseek-v3", 131_072),
    ("deepseek-coder-v2", 163_840),
    ("gemma3", 131_072),
    ("gemma2", 8_192),
    ("phi4", 16_384),
    ("phi3", 131_072),
    ("smollm2", 8_192),
    ("gpt-oss", 131_072),
];

/// The window of a well-known model, if `model` belongs to one.
pub fn context_window(model: &str) -> Option<u64> {
    let base = model.rsplit('/').next().unwrap_or(model);
    let base = base.split(':').next().unwrap_or(base).to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(prefix, _)| base.starts_with(prefix))
        .map(|(_, window)| *window)
}

#[cfg(test)]
mod tests {
    use super::context_window;

    #[test]
    fn families_are_recognised_through_prefixes_and_tags() {
        for (model, window) in [
            ("gpt-4o-mini", Some(128_000)),
            ("gpt-4.1-nano", Some(1_047_576)),
            ("gpt-4", Some(8_192)),
            ("claude-sonnet-4-5-20250929", Some(200_000)),
            ("anthropic/claude-3.5-haiku", Some(200_000)),
            ("llama3.2:3b", Some(131_072)),
            ("llama3:8b", Some(8_192)),
            ("Qwen2.5-Coder-7B-Instruct", Some(32_768)),
            ("o1-mini-2024-09-12", Some(128_000)),
            ("my-finetune", None),
        ] {
            assert_eq!(context_window(model), window, "{model}");
        }
    }
}
