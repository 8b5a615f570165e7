//! `tool_calling = "auto" | "native" | "prompted"` as validated; what each
//! mode does is `providers::tool_calling`'s.

/// `tool_calling` as validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolCalling {
    /// Native, until the server refuses tools; then prompted.
    #[default]
    Auto,
    Native,
    Prompted,
}

impl ToolCalling {
    pub const ALL: [ToolCalling; 3] = [
        ToolCalling::Auto,
        ToolCalling::Native,
        ToolCalling::Prompted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolCalling::Auto => "auto",
            ToolCalling::Native => "native",
            ToolCalling::Prompted => "prompted",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == text)
    }
}
