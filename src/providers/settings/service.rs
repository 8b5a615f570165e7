//! A provider's `type` as Crucible spells it: the wire format it speaks and
//! the defaults of its service. Crucible knows more types than wire formats;
//! the OpenAI-compatible ones share the `openai` wire.

use super::{ANTHROPIC_DEFAULT_ENDPOINT, OLLAMA_DEFAULT_ENDPOINT, OPENAI_DEFAULT_ENDPOINT};
use super::{OLLAMA_DEFAULT_MODEL, ProviderKind};

pub const OPENROUTER_DEFAULT_ENDPOINT: &str = "https://openrouter.ai/api/v1";
pub const ZAI_DEFAULT_ENDPOINT: &str = "https://api.z.ai/api/coding/paas/v4";
/// Cohere's OpenAI-compatible API (its native `/v1` is another format).
pub const COHERE_DEFAULT_ENDPOINT: &str = "https://api.cohere.ai/compatibility/v1";

/// A usable `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderType {
    OpenAi,
    Ollama,
    Anthropic,
    OpenRouter,
    Zai,
    Cohere,
    /// Any OpenAI-compatible server; it needs an `endpoint`.
    Custom,
}

/// What a written `type` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeName {
    Usable(ProviderType),
    /// Crucible knows it, but this agent cannot chat through it: why.
    Unusable(&'static str),
    Unknown,
}

impl ProviderType {
    /// Crucible's spellings, aliases included.
    pub fn parse(text: &str) -> TypeName {
        use ProviderType::*;
        match text {
            "openai" => TypeName::Usable(OpenAi),
            "ollama" => TypeName::Usable(Ollama),
            "anthropic" => TypeName::Usable(Anthropic),
            "openrouter" | "open_router" | "open-router" => TypeName::Usable(OpenRouter),
            "zai" | "z.ai" | "z_ai" => TypeName::Usable(Zai),
            "cohere" => TypeName::Usable(Cohere),
            "custom" => TypeName::Usable(Custom),
            "githubcopilot" | "github-copilot" | "github_copilot" | "copilot" => {
                TypeName::Unusable(
                    "GitHub Copilot needs its OAuth token exchange, which this agent does not do",
                )
            }
            "vertexai" => TypeName::Unusable("Vertex AI has no chat backend (in Crucible either)"),
            "fastembed" | "burn" => TypeName::Unusable("it makes embeddings, it does not chat"),
            "mock" => TypeName::Unusable("it is Crucible's test backend"),
            _ => TypeName::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::OpenAi => "openai",
            ProviderType::Ollama => "ollama",
            ProviderType::Anthropic => "anthropic",
            ProviderType::OpenRouter => "openrouter",
            ProviderType::Zai => "zai",
            ProviderType::Cohere => "cohere",
            ProviderType::Custom => "custom",
        }
    }

    /// The wire format it speaks.
    pub fn kind(self) -> ProviderKind {
        match self {
            ProviderType::Ollama => ProviderKind::Ollama,
            ProviderType::Anthropic => ProviderKind::Anthropic,
            ProviderType::OpenAi
            | ProviderType::OpenRouter
            | ProviderType::Zai
            | ProviderType::Cohere
            | ProviderType::Custom => ProviderKind::OpenAi,
        }
    }

    /// Where its service is; `custom` has none.
    pub fn default_endpoint(self) -> Option<&'static str> {
        match self {
            ProviderType::OpenAi => Some(OPENAI_DEFAULT_ENDPOINT),
            ProviderType::Ollama => Some(OLLAMA_DEFAULT_ENDPOINT),
            ProviderType::Anthropic => Some(ANTHROPIC_DEFAULT_ENDPOINT),
            ProviderType::OpenRouter => Some(OPENROUTER_DEFAULT_ENDPOINT),
            ProviderType::Zai => Some(ZAI_DEFAULT_ENDPOINT),
            ProviderType::Cohere => Some(COHERE_DEFAULT_ENDPOINT),
            ProviderType::Custom => None,
        }
    }

    /// The model Crucible uses when `default_model` is left out (for the
    /// type's own service; another endpoint must name its model).
    pub fn default_model(self) -> Option<&'static str> {
        match self {
            ProviderType::OpenAi => Some("gpt-4o"),
            ProviderType::Ollama => Some(OLLAMA_DEFAULT_MODEL),
            ProviderType::Anthropic => Some("claude-3-5-sonnet-20241022"),
            ProviderType::OpenRouter => Some("openai/gpt-4o"),
            ProviderType::Zai => Some("GLM-4.7"),
            ProviderType::Cohere => Some("command-r-plus"),
            ProviderType::Custom => None,
        }
    }

    /// The environment variable that holds its key, as Crucible reads it.
    pub fn key_variable(self) -> Option<&'static str> {
        match self {
            ProviderType::OpenAi => Some("OPENAI_API_KEY"),
            ProviderType::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderType::OpenRouter => Some("OPENROUTER_API_KEY"),
            ProviderType::Zai => Some("GLM_AUTH_TOKEN"),
            ProviderType::Cohere => Some("COHERE_API_KEY"),
            ProviderType::Ollama | ProviderType::Custom => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crucible_types_map_onto_wire_formats() {
        let usable = |text| match ProviderType::parse(text) {
            TypeName::Usable(found) => found,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(usable("open-router"), ProviderType::OpenRouter);
        assert_eq!(usable("openrouter").kind(), ProviderKind::OpenAi);
        assert_eq!(
            usable("openrouter").default_endpoint(),
            Some("https://openrouter.ai/api/v1")
        );
        assert_eq!(usable("z.ai"), ProviderType::Zai);
        assert_eq!(usable("custom").default_endpoint(), None);
        assert!(matches!(
            ProviderType::parse("copilot"),
            TypeName::Unusable(_)
        ));
        assert!(matches!(
            ProviderType::parse("fastembed"),
            TypeName::Unusable(_)
        ));
        assert_eq!(ProviderType::parse("gemini"), TypeName::Unknown);
    }
}
