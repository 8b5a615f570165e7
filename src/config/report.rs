//! Which keys of the file the agent uses, which it reads past and why, and
//! which key won where two shapes set the same thing: for `doctor`, and one
//! debug line per ignored key at start-up.
//!
//! The file is shared with the Crucible TUI, so most of Crucible's sections
//! are someone else's: they are classified here, never rejected.

/// What the agent made of the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigReport {
    /// Keys that change what the agent does (dotted, `[i]` for array items).
    pub used: Vec<String>,
    /// Keys the agent reads past.
    pub ignored: Vec<Ignored>,
    /// Where two keys set the same thing: which won, in words.
    pub decisions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    pub key: String,
    pub why: String,
}

impl ConfigReport {
    pub(super) fn ignore(&mut self, key: impl Into<String>, why: impl Into<String>) {
        self.ignored.push(Ignored {
            key: key.into(),
            why: why.into(),
        });
    }

    pub(super) fn decide(&mut self, decision: impl Into<String>) {
        self.decisions.push(decision.into());
    }

    /// Classify every key of `file` (after `[include]` was merged in).
    pub(super) fn classify(&mut self, file: &toml::Table) {
        for (key, value) in file {
            self.walk(&[key.as_str()], key, value);
        }
    }

    fn walk(&mut self, path: &[&str], key: &str, value: &toml::Value) {
        match verdict(path) {
            Verdict::Used => self.used.push(key.to_string()),
            Verdict::Ignored(why) => self.ignore(key, why),
            Verdict::Descend => match value {
                toml::Value::Table(table) => {
                    for (name, item) in table {
                        let mut deeper = path.to_vec();
                        deeper.push(name);
                        self.walk(&deeper, &format!("{key}.{name}"), item);
                    }
                }
                toml::Value::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        let mut deeper = path.to_vec();
                        deeper.push("[]");
                        self.walk(&deeper, &format!("{key}[{index}]"), item);
                    }
                }
                _ => self.used.push(key.to_string()),
            },
        }
    }
}

enum Verdict {
    Used,
    Ignored(&'static str),
    Descend,
}

const TUI: &str = "read by the Crucible TUI only";

/// What the agent does with the key at `path`.
fn verdict(path: &[&str]) -> Verdict {
    use Verdict::*;
    match path {
        // This agent's own sections, and the seed's.
        [
            "agent" | "modes" | "mcp_servers" | "permissions" | "shell_environment"
            | "sensitive_files" | "subagents" | "sandbox" | "prices" | "serve",
        ] => Used,
        ["chat"] | ["llm"] | ["llm", "providers"] | ["llm", "providers", _] => Descend,
        [
            "chat",
            "default_provider" | "default_agent" | "system_prompt",
        ] => Used,
        [
            "chat",
            "model" | "endpoint" | "temperature" | "max_tokens" | "timeout_secs",
        ] => Used,
        ["chat", _] => Ignored(TUI),
        ["llm", "default" | "default_provider"] => Used,
        // Agent cards' `specialty` → model.
        ["llm", "models"] => Used,
        ["llm", "providers", _, "trust_level"] => Ignored("trust levels are Crucible's"),
        ["llm", "providers", _, "name"] => Ignored("a display name for the TUI"),
        ["llm", "providers", _, _] => Used,
        // The design document's [llm.TYPE] tables.
        ["llm", _] => Used,
        ["context"] | ["mcp"] | ["mcp", "servers"] | ["mcp", "servers", "[]"] => Descend,
        ["context", _] => Used,
        ["mcp", "servers", "[]", "auto_reconnect"] => {
            Ignored("servers that die are always started again")
        }
        ["mcp", _] | ["mcp", "servers", "[]", _] => Used,
        ["acp"] | ["acp", "agents"] | ["acp", "agents", _] => Descend,
        // A profile's lists apply when this agent runs under its name (--profile).
        ["acp", "agents", _, "permissions"] => Used,
        ["acp", ..] => Ignored("how the Crucible TUI hosts ACP agents"),
        ["cli"] => Ignored("the TUI's command line and highlighting"),
        ["enrichment"] => Ignored("embeddings are made by the Crucible daemon"),
        // Where the kiln's agent cards are.
        ["kilns" | "default_kiln" | "kiln_path"] => Used,
        ["projects" | "session_kiln" | "data_home"] => {
            Ignored("kilns and projects belong to the Crucible daemon")
        }
        ["agent_directories"] => Ignored("agent cards are read from their usual places"),
        ["runtimepath" | "plugins" | "schedules"] => {
            Ignored("plugins and schedules run in Crucible")
        }
        ["storage" | "server" | "workspace"] => Ignored("settings of the Crucible daemon"),
        ["web"] => Ignored("the browser UI of `cru web`"),
        ["logging"] => Ignored("this agent logs by RUST_LOG and --log-file"),
        _ => Ignored("neither crucible-agent nor Crucible knows this key"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crucible_sections_are_ignored_and_ours_used() {
        let file: toml::Table = toml::from_str(
            "default_kiln = \"docs\"\n[kilns]\ndocs = \".\"\n[chat]\nmodel = \"m\"\nshow_diffs = true\n[llm]\ndefault = \"x\"\n[llm.providers.x]\ntemperature = 0.2\ntrust_level = \"local\"\n[[mcp.servers]]\nname = \"gh\"\nauto_reconnect = false\n[mcp.servers.transport]\ntype = \"stdio\"\n[cli.highlighting]\nenabled = true\n",
        )
        .unwrap();
        let mut report = ConfigReport::default();
        report.classify(&file);
        assert_eq!(
            report.used,
            [
                "chat.model",
                "default_kiln",
                "kilns",
                "llm.default",
                "llm.providers.x.temperature",
                "mcp.servers[0].name",
                "mcp.servers[0].transport",
            ]
        );
        let ignored: Vec<&str> = report.ignored.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            ignored,
            [
                "chat.show_diffs",
                "cli",
                "llm.providers.x.trust_level",
                "mcp.servers[0].auto_reconnect",
            ]
        );
    }
}
