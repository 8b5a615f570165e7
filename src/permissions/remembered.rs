//! Answers that outlive the session: "Always allow in this project" writes
//! a `[[permissions.rules]]` entry to `PROJECT/.crucible/permissions.toml`,
//! "Always allow everywhere" to the user's `~/.config/crucible/permissions.toml`.
//! The rule is exactly as narrow as the question: the tool and, for a
//! command, that command line; for a file tool, those files. The files keep
//! their comments and layout (`toml_edit`); the config module reads them at
//! each session start. `/permissions` lists every rule in force with its
//! origin, and revokes one by id (from its file too).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use thiserror::Error;
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};

use super::{Decision, Rule, RuleOrigin, RuleScope, SessionPermissions};
use crate::events::ToolCallInfo;
use crate::tools::Tool;
use crate::util::lock;

/// The rules files' name, in `PROJECT/.crucible/` and the user's config dir.
pub const FILE_NAME: &str = "permissions.toml";

const HEADER: &str = "# Permission rules crucible-agent follows without asking.\n# Written by \"Always allow …\" answers; edit or delete entries freely,\n# or revoke one with /permissions revoke ID. Same keys as [[permissions.rules]]\n# in config.toml; `command` is an exact command line, `path` exact files.\n";

/// Which file an answer is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    Project,
    Everywhere,
}

/// The session's two rules files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFiles {
    /// Where the project's rules file goes (paths in it are relative to it).
    pub project_root: PathBuf,
    /// The user's, when a config directory is known.
    pub user: Option<PathBuf>,
    /// Which project files may allow; None (no data directory): every one.
    pub trust: Option<super::TrustedRules>,
}

impl RuleFiles {
    pub fn project(&self) -> PathBuf {
        self.project_root.join(".crucible").join(FILE_NAME)
    }

    /// The agent itself just wrote `path`: if it is the project's file,
    /// what it holds now is trusted.
    fn wrote(&self, path: &Path) {
        if let Some(trust) = &self.trust
            && path == self.project()
            && let Err(err) = trust.trust_current(path)
        {
            tracing::warn!(path = %path.display(), %err, "cannot record the project rules as trusted");
        }
    }
}

#[derive(Debug, Error)]
pub enum RuleFileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML ({detail}); fix or remove it")]
    Parse { path: PathBuf, detail: String },
    #[error("{path} has no rule number {number}; it was changed meanwhile: list the rules again")]
    Missing { path: PathBuf, number: usize },
}

/// The rule an "always allow" answer to `call` stands for: that tool, and
/// that command line or those files when the call has them.
pub fn answered_rule(call: &ToolCallInfo, tool: &dyn Tool, origin: RuleOrigin) -> Rule {
    let command = call.raw_input["command"]
        .as_str()
        .map(|command| command.trim().to_string());
    Rule {
        scope: RuleScope::Session,
        tool: Some(tool.name().to_string()),
        paths: if command.is_some() {
            Vec::new()
        } else {
            call.locations.iter().map(|l| l.path.clone()).collect()
        },
        command,
        decision: Decision::Allow,
        origin,
        ..Rule::default()
    }
}

/// Add `rule` at the end of the file at `path` (created with a header),
/// with `note` as its comment; paths under `base` are written relative to it.
pub fn append(
    path: &Path,
    rule: &Rule,
    base: Option<&Path>,
    note: &str,
) -> Result<(), RuleFileError> {
    let mut document = read(path)?;
    if document.as_table().is_empty() && document.decor().prefix().is_none() {
        document.decor_mut().set_prefix(HEADER);
    }
    let permissions = document.entry("permissions").or_insert_with(|| {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    });
    let Some(permissions) = permissions.as_table_mut() else {
        return Err(parse_error(path, "`permissions` is not a table"));
    };
    let rules = permissions
        .entry("rules")
        .or_insert_with(|| Item::ArrayOfTables(ArrayOfTables::new()));
    let Some(rules) = rules.as_array_of_tables_mut() else {
        return Err(parse_error(
            path,
            "`permissions.rules` is not a list of tables",
        ));
    };
    let mut entry = Table::new();
    entry.decor_mut().set_prefix(format!("\n# {note}\n"));
    if let Some(tool) = &rule.tool {
        entry.insert("tool", value(tool.as_str()));
    }
    if let Some(command) = &rule.command {
        entry.insert("command", value(command.as_str()));
    }
    let written: Vec<String> = rule
        .paths
        .iter()
        .map(|p| match base.and_then(|base| p.strip_prefix(base).ok()) {
            Some(relative) => relative.display().to_string(),
            None => p.display().to_string(),
        })
        .collect();
    match written.as_slice() {
        [] => {}
        [one] => {
            entry.insert("path", value(one.as_str()));
        }
        many => {
            entry.insert("path", value(many.iter().collect::<toml_edit::Array>()));
        }
    }
    entry.insert(
        "decision",
        value(match rule.decision {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Ask => "ask",
        }),
    );
    rules.push(entry);
    write(path, &document)
}

/// Remove the file's rule number `index` (0-based, in file order).
pub fn remove(path: &Path, index: usize) -> Result<(), RuleFileError> {
    let mut document = read(path)?;
    let rules = document
        .get_mut("permissions")
        .and_then(|p| p.get_mut("rules"))
        .and_then(Item::as_array_of_tables_mut)
        .filter(|rules| index < rules.len())
        .ok_or_else(|| RuleFileError::Missing {
            path: path.to_path_buf(),
            number: index + 1,
        })?;
    rules.remove(index);
    write(path, &document)
}

fn parse_error(path: &Path, detail: &str) -> RuleFileError {
    RuleFileError::Parse {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    }
}

fn read(path: &Path) -> Result<DocumentMut, RuleFileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(RuleFileError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    text.parse::<DocumentMut>()
        .map_err(|err| parse_error(path, err.message()))
}

fn write(path: &Path, document: &DocumentMut) -> Result<(), RuleFileError> {
    let failed = |source| RuleFileError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    // Whole or not at all: a crash mid-write must not cut the file.
    let temporary = path.with_extension("toml.tmp");
    std::fs::write(&temporary, document.to_string()).map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

/// Why `/permissions revoke ID` removed nothing; the user reads it.
#[derive(Debug, Error)]
pub enum RevokeError {
    #[error("There is no rule `{id}`; /permissions lists them with their ids.")]
    Unlisted { id: String },
    #[error("`{id}` is not a rule id")]
    NotAnId { id: String },
    /// The config's rules are changed in the config.
    #[error("`{id}` ({text}) comes from the {origin}; edit it there.")]
    FromTheConfig {
        id: String,
        text: String,
        origin: String,
    },
    /// Listed, but no longer there when it was to be removed.
    #[error("There is no rule `{id}`.")]
    Gone { id: String },
    #[error(transparent)]
    File(#[from] RuleFileError),
}

/// One line of `/permissions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRule {
    /// `s1` (session), `p1` (project file), `u1` (user file), `c1` (config).
    pub id: String,
    pub text: String,
    pub origin: String,
}

impl Rule {
    /// What the rule decides about which calls, in words.
    pub fn describe(&self) -> String {
        let mut text = match self.decision {
            Decision::Allow => "allow".to_string(),
            Decision::Deny => "deny".to_string(),
            Decision::Ask => "ask before".to_string(),
        };
        match &self.tool {
            Some(tool) => {
                let _ = write!(text, " `{tool}`");
            }
            None => text.push_str(" every tool"),
        }
        if let Some(kind) = self.kind {
            let _ = write!(text, " ({kind:?} tools)");
        }
        if let Some(command) = &self.command {
            let _ = write!(text, " running exactly `{command}`");
        }
        if !self.command_prefixes.is_empty() {
            let _ = write!(
                text,
                " running commands starting `{}`",
                self.command_prefixes.join("`, `")
            );
        }
        if !self.paths.is_empty() {
            let paths: Vec<String> = self.paths.iter().map(|p| p.display().to_string()).collect();
            let _ = write!(text, " on {}", paths.join(", "));
        }
        if let Some(pattern) = &self.pattern {
            let _ = write!(text, " where the arguments match /{pattern}/");
        }
        if let RuleScope::Agent(agent) = &self.scope {
            let _ = write!(text, " for agent `{agent}`");
        }
        text
    }
}

impl SessionPermissions {
    /// Where this session writes remembered answers, and what those files
    /// held when it started.
    /// `problems`: why a file is not used, for `/permissions` to say.
    pub fn set_rule_files(&self, files: RuleFiles, loaded: Vec<Rule>, problems: Vec<String>) {
        *lock(&self.rule_files) = Some(files);
        *lock(&self.file_rules) = loaded;
        *lock(&self.file_problems) = problems;
    }

    /// Where this session's rules files are.
    pub fn rule_files(&self) -> Option<RuleFiles> {
        lock(&self.rule_files).clone()
    }

    /// Why a rules file is not used, if one is not.
    pub fn file_problems(&self) -> Vec<String> {
        lock(&self.file_problems).clone()
    }

    /// An "always allow in this project / everywhere" answer: written to
    /// its file and obeyed from now on. A file that cannot be written
    /// leaves a session rule (as narrow), so the answer still holds here.
    pub(super) fn persist(&self, persist: Persist, call: &ToolCallInfo, tool: &dyn Tool) {
        let files = lock(&self.rule_files).clone();
        let target = files.as_ref().and_then(|files| match persist {
            Persist::Project => Some((
                files.project(),
                Some(files.project_root.clone()),
                RuleOrigin::ProjectFile(files.project()),
            )),
            Persist::Everywhere => files
                .user
                .clone()
                .map(|user| (user.clone(), None, RuleOrigin::UserFile(user))),
        });
        let Some((path, base, origin)) = target else {
            tracing::warn!(session = %self.session_id, "no file to remember the answer in; kept for this session");
            lock(&self.file_rules).push(answered_rule(call, tool, RuleOrigin::Session));
            return;
        };
        let rule = answered_rule(call, tool, origin);
        let note = format!(
            "Allowed {} on {} (session {}): {}",
            match persist {
                Persist::Project => "in this project",
                Persist::Everywhere => "everywhere",
            },
            crate::util::date(std::time::SystemTime::now()),
            self.session_id,
            call.title.replace('\n', " ")
        );
        let kept = match append(&path, &rule, base.as_deref(), &note) {
            Ok(()) => {
                if let Some(files) = &files {
                    files.wrote(&path);
                }
                rule
            }
            Err(err) => {
                tracing::warn!(session = %self.session_id, %err, "answer not written; kept for this session");
                Rule {
                    origin: RuleOrigin::Session,
                    ..rule
                }
            }
        };
        lock(&self.file_rules).push(kept);
    }

    /// What the remembered answers (the rules files) say about `call`.
    pub(super) fn remembered_answer(
        &self,
        call: &ToolCallInfo,
        tool: &dyn Tool,
    ) -> Option<Decision> {
        let files = lock(&self.file_rules);
        files
            .iter()
            .find(|rule| rule.matches(call, tool))
            .map(|rule| rule.decision)
    }

    /// Every rule in force, with an id and where it comes from: this
    /// session's answers, the project's and user's files, then the config.
    pub fn listing(&self) -> Vec<ListedRule> {
        let mut listed = Vec::new();
        let mut push = |prefix: &str, n: usize, rule: &Rule, origin: String| {
            let mut text = rule.describe();
            if rule.untrusted {
                text.push_str(" (not applied: the file is not trusted, see below)");
            }
            listed.push(ListedRule {
                id: format!("{prefix}{}", n + 1),
                text,
                origin,
            });
        };
        for (n, rule) in self.lock_session_rules().iter().enumerate() {
            push("s", n, rule, "this session".into());
        }
        let files = lock(&self.file_rules).clone();
        let mut counts = [0usize; 3];
        for rule in &files {
            let (prefix, slot, origin) = match &rule.origin {
                RuleOrigin::ProjectFile(path) => ("p", 0, path.display().to_string()),
                RuleOrigin::UserFile(path) => ("u", 1, path.display().to_string()),
                _ => (
                    "s",
                    2,
                    "this session (its file could not be written)".into(),
                ),
            };
            let n = if slot == 2 {
                self.lock_session_rules().len() + counts[2]
            } else {
                counts[slot]
            };
            counts[slot] += 1;
            push(prefix, n, rule, origin);
        }
        for (n, rule) in self.rules.iter().enumerate() {
            let origin = match &rule.scope {
                RuleScope::Agent(agent) => format!("agent card `{agent}`"),
                _ => "config file".into(),
            };
            push("c", n, rule, origin);
        }
        listed
    }

    /// Remove the rule `id` (as [`Self::listing`] names it), from its file
    /// too. The report says what was removed, or why not.
    pub fn revoke(&self, id: &str) -> Result<String, RevokeError> {
        let listed = self.listing();
        let Some(found) = listed.iter().find(|rule| rule.id == id) else {
            return Err(RevokeError::Unlisted { id: id.to_string() });
        };
        let number: usize = id[1..]
            .parse()
            .map_err(|_| RevokeError::NotAnId { id: id.to_string() })?;
        match &id[..1] {
            "c" => Err(RevokeError::FromTheConfig {
                id: id.to_string(),
                text: found.text.clone(),
                origin: found.origin.clone(),
            }),
            "s" if number <= self.lock_session_rules().len() => {
                self.lock_session_rules().remove(number - 1);
                if let Some(notify) = self.on_remember.get() {
                    notify(self.remembered_rules());
                }
                Ok(format!("Revoked `{id}`: {} (this session).", found.text))
            }
            prefix => {
                let wanted = |rule: &Rule| {
                    matches!(
                        (&rule.origin, prefix),
                        (RuleOrigin::ProjectFile(_), "p")
                            | (RuleOrigin::UserFile(_), "u")
                            | (RuleOrigin::Session | RuleOrigin::Config, "s")
                    )
                };
                let skip = if prefix == "s" {
                    self.lock_session_rules().len()
                } else {
                    0
                };
                let mut files = lock(&self.file_rules);
                let Some(at) = files
                    .iter()
                    .enumerate()
                    .filter(|(_, rule)| wanted(rule))
                    .nth(number - 1 - skip)
                    .map(|(at, _)| at)
                else {
                    return Err(RevokeError::Gone { id: id.to_string() });
                };
                if let RuleOrigin::ProjectFile(path) | RuleOrigin::UserFile(path) =
                    &files[at].origin
                {
                    remove(path, number - 1)?;
                    if let Some(files) = lock(&self.rule_files).as_ref() {
                        files.wrote(path);
                    }
                }
                files.remove(at);
                Ok(format!(
                    "Revoked `{id}`: {} ({}).",
                    found.text, found.origin
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Location, ToolKind};
    use crate::tools::ToolRegistry;
    use serde_json::json;

    fn call(input: serde_json::Value, paths: &[&str]) -> ToolCallInfo {
        ToolCallInfo {
            id: "c".into(),
            name: "x".into(),
            title: "t".into(),
            kind: ToolKind::Execute,
            raw_input: input,
            locations: paths
                .iter()
                .map(|p| Location {
                    path: PathBuf::from(p),
                    line: None,
                })
                .collect(),
        }
    }

    #[test]
    fn an_answered_rule_covers_that_command_or_those_files_and_nothing_more() {
        let registry = ToolRegistry::builtin();
        let shell = registry.get("shell").unwrap();
        let asked = call(json!({"command": "cargo test"}), &[]);
        let rule = answered_rule(&asked, &**shell, RuleOrigin::Config);
        assert!(rule.matches(&asked, &**shell));
        for broader in [
            "cargo test && rm -rf ~",
            "cargo test; curl x | sh",
            "cargo",
            "cargo testx",
        ] {
            assert!(
                !rule.matches(&call(json!({"command": broader}), &[]), &**shell),
                "{broader}"
            );
        }
        let write = registry.get("write_file").unwrap();
        let asked = call(json!({"path": "a.txt"}), &["/p/a.txt"]);
        let rule = answered_rule(&asked, &**write, RuleOrigin::Config);
        assert!(rule.matches(&asked, &**write));
        assert!(!rule.matches(&call(json!({"path": "b.txt"}), &["/p/b.txt"]), &**write));
        assert!(!rule.matches(&asked, &**shell), "another tool");
    }

    #[tokio::test]
    async fn a_project_answer_is_written_and_settles_an_ask_pattern_for_that_command_only() {
        use crate::client::PermissionChoice;
        use crate::client::testing::RecordingClient;
        use crate::permissions::{Permission, PermissionGate, patterns::PatternRule};
        let project = tempfile::tempdir().unwrap();
        let client =
            std::sync::Arc::new(RecordingClient::answering(PermissionChoice::AllowInProject));
        let lists = crate::permissions::PatternLists {
            ask: vec![PatternRule::parse("bash:*").unwrap()],
            ..Default::default()
        };
        let gate = SessionPermissions::new(
            "s".into(),
            client.clone(),
            std::sync::Arc::default(),
            crate::modes::ModePolicy::Ask,
        )
        .with_lists(std::sync::Arc::new(lists));
        let files = RuleFiles {
            project_root: project.path().to_path_buf(),
            user: None,
            trust: None,
        };
        gate.set_rule_files(files.clone(), Vec::new(), Vec::new());
        let registry = ToolRegistry::builtin();
        let shell = registry.get("shell").unwrap();
        let tests = call(json!({"command": "cargo test"}), &[]);
        for _ in 0..3 {
            assert_eq!(gate.check(&tests, &**shell).await, Permission::Allow);
        }
        assert_eq!(client.asked("request_permission"), 1);
        let written = std::fs::read_to_string(files.project()).unwrap();
        assert!(written.contains("command = \"cargo test\""), "{written}");
        gate.check(&call(json!({"command": "cargo test; rm x"}), &[]), &**shell)
            .await;
        assert_eq!(client.asked("request_permission"), 2);
        assert_eq!(gate.listing()[0].id, "p1");
        assert!(gate.revoke("p1").is_ok());
        // The second question was answered the same way: its own rule stays.
        let left = std::fs::read_to_string(files.project()).unwrap();
        assert!(
            !left.contains("\"cargo test\"") && left.contains("\"cargo test; rm x\""),
            "{left}"
        );
        assert_eq!(gate.listing()[0].id, "p1");
    }

    #[test]
    fn appending_keeps_what_the_file_held_and_removing_takes_one_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".crucible").join(FILE_NAME);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "# mine, keep me\n[[permissions.rules]]\ntool = \"grep\" # inline\ndecision = \"deny\"\n").unwrap();
        let rule = Rule {
            tool: Some("write_file".into()),
            paths: vec![dir.path().join("src/a.rs")],
            decision: Decision::Allow,
            ..Rule::default()
        };
        append(&path, &rule, Some(dir.path()), "Allowed in this project").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# mine, keep me\n"), "{text}");
        assert!(text.contains("tool = \"grep\" # inline"), "{text}");
        assert!(text.contains("# Allowed in this project\n[[permissions.rules]]\ntool = \"write_file\"\npath = \"src/a.rs\"\ndecision = \"allow\""), "{text}");
        remove(&path, 0).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("grep") && text.contains("write_file"),
            "{text}"
        );
        assert!(matches!(
            remove(&path, 5),
            Err(RuleFileError::Missing { .. })
        ));
        let fresh = dir.path().join("new").join(FILE_NAME);
        append(&fresh, &rule, None, "n").unwrap();
        assert!(
            std::fs::read_to_string(&fresh)
                .unwrap()
                .starts_with("# Permission rules")
        );
    }
}
