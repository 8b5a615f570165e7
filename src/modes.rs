//! Session modes (seed 001, "Internal Agent Default Modes"): how much the
//! agent may do without asking. The [`ModeRegistry`] holds the three
//! built-ins and the modes the config defines (`[modes.ID]`); sessions offer
//! them both as ACP `modes` and as a `mode` config option.

use std::sync::Arc;

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

impl ModePolicy {
    pub const ALL: [ModePolicy; 3] = [ModePolicy::ReadOnly, ModePolicy::Ask, ModePolicy::Auto];

    /// The name config files use.
    pub fn as_str(self) -> &'static str {
        match self {
            ModePolicy::ReadOnly => "read_only",
            ModePolicy::Ask => "ask",
            ModePolicy::Auto => "auto",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|policy| policy.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    pub id: String,
    pub name: String,
    pub description: String,
    pub policy: ModePolicy,
}

impl Mode {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        policy: ModePolicy,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            policy,
        }
    }
}

/// The mode sessions start in unless `[agent] default_mode` says otherwise.
/// The seed starts in `plan`; an editor user expects an agent that can act,
/// with a question before each change, so `act` is the default here.
pub const DEFAULT_MODE: &str = "act";

/// Other clients' names for the built-in modes: Crucible's own client sends
/// `normal`, `plan` and `auto` whatever modes the agent advertises.
const ALIASES: [(&str, &str); 1] = [("normal", "act")];

/// The ids of the built-in modes, which the config may not redefine.
pub const BUILTIN_IDS: [&str; 3] = ["plan", "act", "auto"];

fn builtins() -> Vec<Mode> {
    vec![
        Mode::new(
            "plan",
            "Plan",
            "Read and search only: explore the code and propose a plan; nothing is changed or run",
            ModePolicy::ReadOnly,
        ),
        Mode::new(
            "act",
            "Act",
            "Read freely; ask before each change to a file or command",
            ModePolicy::Ask,
        ),
        Mode::new(
            "auto",
            "Auto",
            "Change files and run commands without asking (rules that reject still apply)",
            ModePolicy::Auto,
        ),
    ]
}

/// Why a mode cannot be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    #[error("`{0}` is a built-in mode and cannot be redefined")]
    Builtin(String),
    #[error("mode `{0}` is defined twice")]
    Duplicate(String),
    #[error(
        "`{0}` is not a usable mode id; use lowercase letters, digits, `-` and `_` (at most 64)"
    )]
    BadId(String),
}

/// The modes a session may be in: the built-ins first, then the config's,
/// in the order given. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeRegistry {
    modes: Arc<Vec<Mode>>,
}

impl Default for ModeRegistry {
    fn default() -> Self {
        Self {
            modes: Arc::new(builtins()),
        }
    }
}

impl ModeRegistry {
    /// The built-ins and `extra`.
    pub fn with_modes(extra: Vec<Mode>) -> Result<Self, ModeError> {
        let mut modes = builtins();
        for mode in extra {
            if BUILTIN_IDS.contains(&mode.id.as_str()) {
                return Err(ModeError::Builtin(mode.id));
            }
            if !valid_id(&mode.id) {
                return Err(ModeError::BadId(mode.id));
            }
            if modes.iter().any(|known| known.id == mode.id) {
                return Err(ModeError::Duplicate(mode.id));
            }
            modes.push(mode);
        }
        Ok(Self {
            modes: Arc::new(modes),
        })
    }

    pub fn find(&self, id: &str) -> Option<&Mode> {
        self.modes.iter().find(|mode| mode.id == id)
    }

    /// The id a client's mode name stands for: a mode's own id, or an
    /// alias other clients use for a built-in (Crucible's `normal` is act).
    /// A configured mode of the alias's name wins over the alias.
    pub fn resolve<'a>(&'a self, name: &'a str) -> &'a str {
        if self.find(name).is_some() {
            return name;
        }
        ALIASES
            .iter()
            .find(|(alias, _)| *alias == name)
            .map_or(name, |(_, id)| id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Mode> {
        self.modes.iter()
    }

    /// "plan, act, auto, review": for error messages.
    pub fn ids(&self) -> String {
        self.modes
            .iter()
            .map(|mode| mode.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_come_first_then_config_modes() {
        let registry = ModeRegistry::with_modes(vec![Mode::new(
            "review",
            "Review",
            "Read, then ask",
            ModePolicy::Ask,
        )])
        .unwrap();
        assert_eq!(registry.ids(), "plan, act, auto, review");
        assert_eq!(registry.find("review").unwrap().policy, ModePolicy::Ask);
        assert_eq!(registry.find("plan").unwrap().policy, ModePolicy::ReadOnly);
        assert!(registry.find("nope").is_none());
        assert!(ModeRegistry::default().find(DEFAULT_MODE).is_some());
    }

    #[test]
    fn crucible_mode_names_resolve_to_builtins() {
        let modes = ModeRegistry::default();
        assert_eq!(modes.resolve("normal"), "act");
        assert_eq!(modes.resolve("plan"), "plan");
        assert_eq!(modes.resolve("auto"), "auto");
        assert_eq!(modes.resolve("nonsense"), "nonsense");
    }

    #[test]
    fn builtin_duplicate_and_bad_ids_are_refused() {
        let mode = |id: &str| Mode::new(id, id, "", ModePolicy::Auto);
        assert_eq!(
            ModeRegistry::with_modes(vec![mode("plan")]),
            Err(ModeError::Builtin("plan".into()))
        );
        assert_eq!(
            ModeRegistry::with_modes(vec![mode("x"), mode("x")]),
            Err(ModeError::Duplicate("x".into()))
        );
        assert_eq!(
            ModeRegistry::with_modes(vec![mode("Bad Id")]),
            Err(ModeError::BadId("Bad Id".into()))
        );
    }

    #[test]
    fn policies_read_their_config_names() {
        for policy in ModePolicy::ALL {
            assert_eq!(ModePolicy::parse(policy.as_str()), Some(policy));
        }
        assert_eq!(ModePolicy::parse("yolo"), None);
    }
}
