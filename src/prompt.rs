//! The system prompt, in layers (seeds 000 and 004): the base prompt
//! (compiled in from `prompts/base.md`, or the project's
//! `.crucible/system_prompt.md`) → the mode's layer → project instructions
//! (`AGENTS.md`, `CLAUDE.md`, or the config's `[context] rules_files`, from
//! the repository root down to the cwd) →
//! the active agent card → the user's `system_prompt` from the config.
//! Template variables are filled last, in every layer.

use std::path::{Path, PathBuf};

const BASE_PROMPT: &str = include_str!("../prompts/base.md");
/// The base prompt for small windows: the fixed part of a request must
/// leave a 4k window room for the conversation.
const BASE_PROMPT_SMALL: &str = include_str!("../prompts/base_small.md");
/// Windows up to this many tokens get the small base prompt and brief tool
/// definitions.
pub const SMALL_WINDOW: u64 = 8192;
/// Files of project instructions, read in this order in each directory,
/// unless the config names others ([`RulesFiles`]).
const PROJECT_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// A project's replacement for the base prompt.
const PROJECT_OVERRIDE: &str = ".crucible/system_prompt.md";
/// Project instruction files bigger than this are cut: they are read into
/// every request.
const PROJECT_FILE_MAX: usize = 32 * 1024;

/// The built-in layer of a mode; ids this build does not know (a mode from
/// the config) have none.
pub fn mode_layer(mode: &str) -> Option<&'static str> {
    match mode {
        "plan" => Some(include_str!("../prompts/modes/plan.md")),
        "act" => Some(include_str!("../prompts/modes/act.md")),
        "auto" => Some(include_str!("../prompts/modes/auto.md")),
        _ => None,
    }
}

/// The one-paragraph layer of a built-in mode, for small windows.
fn mode_layer_small(mode: &str) -> Option<&'static str> {
    match mode {
        "plan" => Some(include_str!("../prompts/modes/small/plan.md")),
        "act" => Some(include_str!("../prompts/modes/small/act.md")),
        "auto" => Some(include_str!("../prompts/modes/small/auto.md")),
        _ => None,
    }
}

/// `[context] rules_files` (Crucible's key): the files that hold the
/// project's instructions, read in this order in each directory, as paths
/// relative to it. None: `AGENTS.md`, then `CLAUDE.md`; empty: none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesFiles(pub Option<Vec<PathBuf>>);

impl RulesFiles {
    fn names(&self) -> Vec<&Path> {
        match &self.0 {
            Some(files) => files.iter().map(PathBuf::as_path).collect(),
            None => PROJECT_FILES.iter().map(Path::new).collect(),
        }
    }
}

pub struct PromptVars<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub cwd: &'a Path,
    pub mode: &'a str,
    /// The names of the tools actually offered.
    pub tools: &'a [String],
}

/// What goes into a session's system prompt besides the variables.
#[derive(Debug, Clone, Default)]
pub struct PromptLayers {
    /// `.crucible/system_prompt.md` of the project, replacing the base.
    pub base_override: Option<String>,
    pub mode: Option<String>,
    /// The mode's short layer, used instead when the window is small.
    pub mode_small: Option<String>,
    /// Project instruction files, outermost first, with their paths.
    pub project: Vec<(PathBuf, String)>,
    /// The active agent card's name and body.
    pub agent: Option<(String, String)>,
    /// `[chat] system_prompt` from the config.
    pub user: Option<String>,
    /// The client's `systemPrompt`: the last layer, or the base's replacement.
    pub client: Option<crate::model::ClientPrompt>,
    /// The model's window is small ([`SMALL_WINDOW`]): the built-in base
    /// prompt is the short one.
    pub small: bool,
}

impl PromptLayers {
    /// Read the project's files for a session in `cwd`. Done per turn, so
    /// edits to AGENTS.md apply from the next prompt.
    pub fn load(cwd: &Path, mode: &str, agent: Option<(&str, &str)>, user: Option<&str>) -> Self {
        Self::load_with(cwd, &RulesFiles::default(), mode, agent, user)
    }

    /// [`Self::load`] with the config's rules files.
    pub fn load_with(
        cwd: &Path,
        rules_files: &RulesFiles,
        mode: &str,
        agent: Option<(&str, &str)>,
        user: Option<&str>,
    ) -> Self {
        Self {
            base_override: read_limited(&cwd.join(PROJECT_OVERRIDE)),
            mode: mode_layer(mode).map(str::to_string),
            mode_small: mode_layer_small(mode).map(str::to_string),
            project: project_instructions(cwd, rules_files),
            agent: agent.map(|(name, body)| (name.to_string(), body.to_string())),
            user: user.map(str::to_string),
            client: None,
            small: false,
        }
    }

    pub fn render(&self, vars: &PromptVars<'_>) -> String {
        self.render_on(vars, &today())
    }

    fn render_on(&self, vars: &PromptVars<'_>, date: &str) -> String {
        let mut layers: Vec<String> = Vec::new();
        let client = self.client.as_ref();
        let base = match client.filter(|c| c.replaces_base) {
            Some(client) => client.text.as_str(),
            None => match &self.base_override {
                Some(text) => text.as_str(),
                None if self.small => BASE_PROMPT_SMALL,
                None => BASE_PROMPT,
            },
        };
        layers.push(base.trim().to_string());
        let mode = match &self.mode_small {
            Some(short) if self.small => Some(short),
            _ => self.mode.as_ref(),
        };
        if let Some(mode) = mode {
            layers.push(mode.trim().to_string());
        }
        if !self.project.is_empty() {
            let mut text = String::from(
                "# Project instructions\nThe project's own instructions for agents. Follow them; where they conflict with the guidance above, they win.",
            );
            for (path, content) in &self.project {
                text.push_str(&format!("\n\n## {}\n{}", path.display(), content.trim()));
            }
            layers.push(text);
        }
        if let Some((name, body)) = &self.agent
            && !body.trim().is_empty()
        {
            layers.push(format!("# Agent: {name}\n{}", body.trim()));
        }
        if let Some(user) = self
            .user
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            layers.push(format!("# Additional instructions from the user\n{user}"));
        }
        if let Some(client) = client.filter(|c| !c.replaces_base) {
            layers.push(format!(
                "# Instructions from the client\n{}",
                client.text.trim()
            ));
        }
        render(&layers.join("\n\n"), vars, date)
    }
}

/// The rules files (AGENTS.md and CLAUDE.md unless the config names
/// others) from the repository root (the nearest ancestor holding `.git`)
/// down to `cwd`; outside a repository, only `cwd`'s. Missing ones are skipped.
pub fn project_instructions(cwd: &Path, rules_files: &RulesFiles) -> Vec<(PathBuf, String)> {
    let mut dirs: Vec<&Path> = Vec::new();
    let mut found_root = false;
    for dir in cwd.ancestors() {
        dirs.push(dir);
        if dir.join(".git").exists() {
            found_root = true;
            break;
        }
    }
    if !found_root {
        dirs.truncate(1);
    }
    let names = rules_files.names();
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for dir in dirs.into_iter().rev() {
        for name in &names {
            let path = dir.join(name);
            // A name listed twice is read once.
            if out.iter().any(|(seen, _)| *seen == path) {
                continue;
            }
            if let Some(text) = read_limited(&path) {
                out.push((path, text));
            }
        }
    }
    out
}

fn read_limited(path: &Path) -> Option<String> {
    let mut text = std::fs::read_to_string(path).ok()?;
    if text.trim().is_empty() {
        return None;
    }
    if text.len() > PROJECT_FILE_MAX {
        let mut cut = PROJECT_FILE_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[… cut: the file is longer than 32 KiB]");
    }
    Some(text)
}

fn render(template: &str, vars: &PromptVars<'_>, date: &str) -> String {
    let cwd = vars.cwd.display().to_string();
    let tools = if vars.tools.is_empty() {
        "none (answer from the conversation)".to_string()
    } else {
        vars.tools.join(", ")
    };
    let replacements: [(&str, &str); 6] = [
        ("{{provider}}", vars.provider),
        ("{{model}}", vars.model),
        ("{{cwd}}", &cwd),
        ("{{date}}", date),
        ("{{tools}}", &tools),
        ("{{mode}}", vars.mode),
    ];
    let mut out = template.trim().to_string();
    for (key, value) in replacements {
        if out.contains(key) {
            out = out.replace(key, value);
        }
    }
    out
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    crate::util::date(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(cwd: &'a Path, tools: &'a [String]) -> PromptVars<'a> {
        PromptVars {
            provider: "local",
            model: "smollm2-135m",
            cwd,
            mode: "plan",
            tools,
        }
    }

    #[test]
    fn variables_are_filled() {
        let tools = vec!["read_file".to_string(), "grep".to_string()];
        let layers = PromptLayers::load(Path::new("/nonexistent/project"), "plan", None, None);
        let text = layers.render_on(&vars(Path::new("/work/project"), &tools), "2026-11-23");
        for expected in [
            "smollm2-135m",
            "provider local",
            "/work/project",
            "2026-11-23",
            "read_file, grep",
            "in plan mode",
            "# Plan mode",
        ] {
            assert!(text.contains(expected), "{expected} missing in: {text}");
        }
        assert!(!text.contains("{{"), "unfilled variable in: {text}");
    }

    #[test]
    fn layers_come_in_order_and_the_project_may_replace_the_base() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let sub = repo.join("crate");
        std::fs::create_dir_all(sub.join(".crucible")).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(root.path().join("AGENTS.md"), "OUTSIDE THE REPO").unwrap();
        std::fs::write(repo.join("AGENTS.md"), "ROOT AGENTS").unwrap();
        std::fs::write(repo.join("CLAUDE.md"), "ROOT CLAUDE").unwrap();
        std::fs::write(sub.join("AGENTS.md"), "SUB AGENTS").unwrap();
        let layers = PromptLayers::load(
            &sub,
            "act",
            Some(("rev", "CARD BODY")),
            Some("USER ADDITION"),
        );
        let text = layers.render_on(&vars(&sub, &[]), "2026-01-01");
        let order: Vec<usize> = [
            "Crucible",
            "# Act mode",
            "ROOT AGENTS",
            "ROOT CLAUDE",
            "SUB AGENTS",
            "CARD BODY",
            "USER ADDITION",
        ]
        .iter()
        .map(|needle| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} missing: {text}"))
        })
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        assert!(!text.contains("OUTSIDE THE REPO"));

        std::fs::write(
            sub.join(".crucible/system_prompt.md"),
            "OWN BASE for {{model}}",
        )
        .unwrap();
        let layers = PromptLayers::load(&sub, "unknown-mode", None, None);
        let text = layers.render_on(&vars(&sub, &[]), "2026-01-01");
        assert!(text.starts_with("OWN BASE for smollm2-135m"), "{text}");
        assert!(!text.contains("Crucible"));
        assert!(!text.contains("# Act mode"));
    }

    #[test]
    fn configured_rules_files_replace_the_default_ones_in_their_order() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path();
        let sub = repo.join("crate");
        std::fs::create_dir_all(sub.join(".github")).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join("AGENTS.md"), "ROOT AGENTS").unwrap();
        std::fs::write(repo.join(".rules"), "ROOT RULES").unwrap();
        std::fs::write(sub.join(".rules"), "SUB RULES").unwrap();
        std::fs::write(sub.join(".github/copilot-instructions.md"), "SUB COPILOT").unwrap();
        let files = |names: &[&str]| RulesFiles(Some(names.iter().map(PathBuf::from).collect()));
        let found = |rules: &RulesFiles| -> Vec<String> {
            project_instructions(&sub, rules)
                .into_iter()
                .map(|(_, text)| text)
                .collect()
        };
        assert_eq!(
            found(&files(&[
                ".github/copilot-instructions.md",
                ".rules",
                "MISSING.md",
                ".rules"
            ])),
            ["ROOT RULES", "SUB COPILOT", "SUB RULES"]
        );
        assert!(found(&files(&[])).is_empty());
        assert_eq!(found(&RulesFiles::default()), ["ROOT AGENTS"]);
    }
}
