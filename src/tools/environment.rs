//! What environment a command or a server started for the model gets. The
//! agent's own environment often holds keys (`OPENAI_API_KEY`,
//! `GITHUB_TOKEN`, …) that the model must not read back: commands get it
//! through an [`EnvironmentPolicy`] (`[shell_environment]`), MCP stdio
//! servers only [`CORE_VARIABLES`] and their own variables.

use crate::util::glob_matches;

/// The variables a program needs to run normally: the base of an MCP stdio
/// server's environment, and what `inherit = "core"` keeps (PATH, HOME,
/// USER, LOGNAME, SHELL, TERM, LANG and TMPDIR on Unix; PATH, SystemRoot,
/// TEMP, USERPROFILE, APPDATA and the like on Windows).
pub const CORE_VARIABLES: &[&str] = crate::platform::CORE_VARIABLES;

/// Names left out of a command's environment unless
/// `ignore_default_excludes` (matched without regard to case).
pub const DEFAULT_EXCLUDES: &[&str] =
    &["*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*CREDENTIAL*"];

/// The core variables of the agent's own environment that are set.
pub fn core_environment() -> Vec<(String, String)> {
    CORE_VARIABLES
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .collect()
}

/// Which of the agent's variables a command starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Inherit {
    /// All of them (then filtered).
    #[default]
    All,
    /// Only [`CORE_VARIABLES`].
    Core,
    /// None: only `set`.
    None,
}

/// `[shell_environment]`: how a command's environment is built from the
/// agent's. In order: `inherit`, the default excludes (unless ignored),
/// `exclude`, `include_only`, then `set`. Globs use `*` and ignore case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvironmentPolicy {
    pub inherit: Inherit,
    /// Keep names matching [`DEFAULT_EXCLUDES`].
    pub ignore_default_excludes: bool,
    /// Names to leave out.
    pub exclude: Vec<String>,
    /// When not empty, only names matching one of these are kept.
    pub include_only: Vec<String>,
    /// Set last, whatever the rest says.
    pub set: Vec<(String, String)>,
}

/// A command's environment, and what the policy kept from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandEnvironment {
    /// What the command gets.
    pub variables: Vec<(String, String)>,
    /// The values of variables left out by an exclude (default or own):
    /// secrets that must not come back in a result either.
    pub withheld: Vec<String>,
    /// How many of the agent's variables were left out (by any rule).
    pub left_out: usize,
    /// How many of them by an exclude (default or own).
    pub excluded: usize,
}

impl EnvironmentPolicy {
    /// The environment of a command started by an agent whose environment
    /// is `from`.
    pub fn apply(&self, from: impl IntoIterator<Item = (String, String)>) -> CommandEnvironment {
        let any = |patterns: &[String], name: &str| {
            let name = name.to_ascii_lowercase();
            patterns
                .iter()
                .any(|p| glob_matches(&p.to_ascii_lowercase(), &name))
        };
        let default_excludes: Vec<String> = if self.ignore_default_excludes {
            Vec::new()
        } else {
            DEFAULT_EXCLUDES.iter().map(|p| p.to_string()).collect()
        };
        let mut result = CommandEnvironment::default();
        for (name, value) in from {
            let inherited = match self.inherit {
                Inherit::All => true,
                Inherit::Core => CORE_VARIABLES
                    .iter()
                    .any(|core| crate::platform::same_variable(core, &name)),
                Inherit::None => false,
            };
            if !inherited {
                result.left_out += 1;
                continue;
            }
            if any(&default_excludes, &name) || any(&self.exclude, &name) {
                result.left_out += 1;
                result.excluded += 1;
                if !value.is_empty() {
                    result.withheld.push(value);
                }
                continue;
            }
            if !self.include_only.is_empty() && !any(&self.include_only, &name) {
                result.left_out += 1;
                continue;
            }
            result.variables.push((name, value));
        }
        for (name, value) in &self.set {
            result.variables.retain(|(kept, _)| kept != name);
            result.variables.push((name.clone(), value.clone()));
        }
        result
    }

    /// [`Self::apply`] to the agent's own environment (variables whose name
    /// or value is not Unicode are left out).
    pub fn for_command(&self) -> CommandEnvironment {
        self.apply(std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> Vec<(String, String)> {
        [
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("OPENAI_API_KEY", "sk-1"),
            ("github_token", "ghp-2"),
            ("DB_PASSWORD", "pw-3"),
            ("EDITOR", "vi"),
            ("RUST_LOG", "debug"),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
    }

    fn names(env: &CommandEnvironment) -> Vec<&str> {
        env.variables.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn secret_names_are_left_out_by_default_whatever_their_case() {
        let env = EnvironmentPolicy::default().apply(agent());
        assert_eq!(names(&env), ["PATH", "HOME", "EDITOR", "RUST_LOG"]);
        assert_eq!(env.withheld, ["sk-1", "ghp-2", "pw-3"]);
        assert_eq!((env.left_out, env.excluded), (3, 3));
        let all = EnvironmentPolicy {
            ignore_default_excludes: true,
            ..Default::default()
        }
        .apply(agent());
        assert_eq!(all.variables.len(), 7);
        assert!(all.withheld.is_empty());
    }

    #[test]
    fn inherit_exclude_include_only_and_set_apply_in_order() {
        let core = EnvironmentPolicy {
            inherit: Inherit::Core,
            ..Default::default()
        };
        let env = core.apply(agent());
        assert_eq!(names(&env), ["PATH", "HOME"]);
        assert_eq!((env.left_out, env.excluded), (5, 0));
        let none = EnvironmentPolicy {
            inherit: Inherit::None,
            set: vec![("A".into(), "1".into())],
            ..Default::default()
        };
        assert_eq!(none.apply(agent()).variables, [("A".into(), "1".into())]);
        let filtered = EnvironmentPolicy {
            exclude: vec!["rust_*".into()],
            include_only: vec!["PATH".into(), "RUST*".into(), "E*".into()],
            set: vec![
                ("EDITOR".into(), "nano".into()),
                ("MY_TOKEN".into(), "t".into()),
            ],
            ..Default::default()
        };
        let env = filtered.apply(agent());
        assert_eq!(
            env.variables,
            [
                ("PATH".into(), "/bin".into()),
                ("EDITOR".into(), "nano".into()),
                ("MY_TOKEN".into(), "t".into())
            ]
        );
        assert!(env.withheld.contains(&"debug".to_string()));
    }
}
