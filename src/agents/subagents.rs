//! How far delegation may go (`[subagents]`): how deep children may
//! nest, how many one turn may start, how many tokens each may use.

/// The limits on delegated agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentSettings {
    /// How many levels of children below a session the user started: 1
    /// lets it delegate and keeps its children from delegating again; 0
    /// turns delegation off.
    pub max_depth: u32,
    /// Children one turn of a session may start (concurrent or not).
    pub max_per_turn: u32,
    /// Tokens (prompt and completion, every model call) one child may use
    /// before it is stopped; None for no limit.
    pub token_budget: Option<u64>,
}

impl Default for SubagentSettings {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_per_turn: 4,
            token_budget: None,
        }
    }
}
