//! Session modes (seed 001, "Internal Agent Default Modes"): how much the
//! agent may do without asking. Offered to the client both as ACP `modes`
//! and as a `mode` config option.

/// What a mode lets tools do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModePolicy {
    /// Only tools that change nothing are offered; others are refused.
    ReadOnly,
    /// Changes and commands ask the user first (unless a rule says otherwise).
    Ask,
    /// Everything runs without asking, except what a rule rejects.
    Auto,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub policy: ModePolicy,
}

/// The mode sessions start in unless `[agent] default_mode` says otherwise.
/// The seed starts in `plan`; an editor user expects an agent that can act,
/// with a question before each change, so `act` is the default here.
pub const DEFAULT_MODE: &str = "act";

pub const MODES: [Mode; 3] = [
    Mode {
        id: "plan",
        name: "Plan",
        description: "Read and search only: explore the code and propose a plan; nothing is changed or run",
        policy: ModePolicy::ReadOnly,
    },
    Mode {
        id: "act",
        name: "Act",
        description: "Read freely; ask before each change to a file or command",
        policy: ModePolicy::Ask,
    },
    Mode {
        id: "auto",
        name: "Auto",
        description: "Change files and run commands without asking (rules that reject still apply)",
        policy: ModePolicy::Auto,
    },
];

pub fn find(id: &str) -> Option<&'static Mode> {
    MODES.iter().find(|mode| mode.id == id)
}

pub fn ids() -> String {
    MODES.iter().map(|m| m.id).collect::<Vec<_>>().join(", ")
}
