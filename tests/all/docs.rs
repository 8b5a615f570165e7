//! The documentation stays true: every relative link and `#anchor` in
//! README.md, ARCHITECTURE.md, CHANGELOG.md and docs/ leads somewhere; every
//! key of config.sample.toml is on the manual's configuration page, and
//! every example there is read by the agent's own config reader; every
//! configuration example anywhere, copied with no variable set, gets from
//! `doctor` only fixes that keep the user's file; every
//! subcommand and flag of `crucible-agent --help` is on the command-line page.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use crucible_agent::config::{Config, Overrides};

const CONFIGURATION_PAGE: &str = "docs/src/configuration.md";
const COMMAND_LINE_PAGE: &str = "docs/src/command-line.md";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The Markdown files whose links are checked: the three at the root and
/// every page under docs/.
fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .iter()
        .map(|name| root().join(name))
        .collect();
    let mut folders = vec![root().join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // mdbook's output, when someone built the book here.
                if path.file_name() != Some("book".as_ref()) {
                    folders.push(path);
                }
            } else if path.extension() == Some("md".as_ref()) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// One line of a Markdown file, and whether it is inside a fenced code block.
struct Line<'a> {
    text: &'a str,
    in_code_block: bool,
}

fn lines(markdown: &str) -> Vec<Line<'_>> {
    let mut in_code_block = false;
    let mut out = Vec::new();
    for text in markdown.lines() {
        let fence = text.trim_start().starts_with("```");
        if fence {
            in_code_block = !in_code_block;
        }
        out.push(Line {
            text,
            in_code_block: in_code_block || fence,
        });
    }
    out
}

/// A line split into its prose, inline code spans taken out (a link inside
/// one is an example, not a link), and the contents of those spans.
fn split_code_spans(text: &str) -> (String, String) {
    let chars: Vec<char> = text.chars().collect();
    let (mut prose, mut code) = (String::new(), String::new());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            prose.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let start = i + run;
        let close = (start..chars.len()).find(|&j| {
            chars[j..].iter().take_while(|c| **c == '`').count() == run
                && (j == 0 || chars[j - 1] != '`')
        });
        match close {
            Some(end) => {
                code.extend(&chars[start..end]);
                code.push(' ');
                i = end + run;
            }
            None => {
                prose.extend(&chars[i..start]);
                i = start;
            }
        }
    }
    (prose, code)
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-`
/// and `_`), spaces to hyphens; markup (code ticks, link targets) is not
/// part of the text.
fn slug(heading: &str) -> String {
    let text = unlink(&heading.replace('`', ""));
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `[text](target)` → `text`.
fn unlink(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The anchors of a file's headings, numbered as GitHub numbers repeats.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for line in lines(markdown).iter().filter(|line| !line.in_code_block) {
        let hashes = line.text.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line.text[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line.text[hashes..]);
        let count = seen.entry(base.clone()).or_insert(0);
        anchors.insert(match *count {
            0 => base.clone(),
            n => format!("{base}-{n}"),
        });
        *count += 1;
    }
    anchors
}

/// The targets of the Markdown links (and images) outside code.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in lines(markdown).iter().filter(|line| !line.in_code_block) {
        let (prose, _) = split_code_spans(line.text);
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find([')', ' ']).unwrap_or(after.len());
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{shown}: {target}: no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if resolved.extension() != Some("md".as_ref()) {
                broken.push(format!(
                    "{shown}: {target}: an anchor into a file that is not Markdown"
                ));
                continue;
            }
            let heading_anchors = anchors(&std::fs::read_to_string(&resolved).unwrap());
            if !heading_anchors.contains(anchor) {
                broken.push(format!(
                    "{shown}: {target}: no heading has the anchor #{anchor}"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(
        slug("Rewind: conversation and files"),
        "rewind-conversation-and-files"
    );
    assert_eq!(
        slug("`[chat]`: the session's start"),
        "chat-the-sessions-start"
    );
    assert_eq!(
        slug("`name` on `tool_call` / `tool_call_update`"),
        "name-on-tool_call--tool_call_update"
    );
    assert_eq!(slug("See [Budgets](x.md#budgets)"), "see-budgets");
    let twice = anchors("# A\n\n```\n# not a heading\n```\n## A\n");
    assert_eq!(twice, BTreeSet::from(["a".to_string(), "a-1".to_string()]));
    assert_eq!(
        link_targets("[a](b.md#c) `[d](e.md)` ![i](j.svg)"),
        ["b.md#c", "j.svg"]
    );
}

/// What a line of config.sample.toml names, commented out or not: a table
/// (`[name]`, `[[name]]`) or a key (`key = …`).
fn sample_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in read("config.sample.toml").lines() {
        let body = line.strip_prefix('#').unwrap_or(line);
        let body = body.strip_prefix(' ').unwrap_or(body);
        if let Some(table) = body.strip_prefix('[') {
            let table = table.trim_start_matches('[');
            // A header is the whole line (`[redacted] wherever…` is prose).
            if let Some(end) = table.find(']') {
                let rest = table[end..].trim_start_matches(']').trim();
                if rest.is_empty() || rest.starts_with('#') {
                    names.insert(format!("[{}]", &table[..end]));
                }
            }
            continue;
        }
        let key: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !key.is_empty() && body[key.len()..].trim_start().starts_with('=') {
            names.insert(key);
        }
    }
    names
}

/// The code on a page: fenced blocks and inline spans, as one text.
fn code_of(markdown: &str) -> String {
    let mut code = String::new();
    for line in lines(markdown) {
        if line.in_code_block {
            code.push_str(line.text);
        } else {
            code.push_str(&split_code_spans(line.text).1);
        }
        code.push('\n');
    }
    code
}

fn has_word(text: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

#[test]
fn every_key_of_the_sample_config_is_on_the_configuration_page() {
    let code = code_of(&read(CONFIGURATION_PAGE));
    let names = sample_names();
    assert!(
        names.len() > 100,
        "config.sample.toml names only {} keys and tables",
        names.len()
    );
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| {
            if name.starts_with('[') {
                !code.contains(name.as_str())
            } else {
                !has_word(&code, name)
            }
        })
        .collect();
    assert!(
        missing.is_empty(),
        "in config.sample.toml, not in the code of {CONFIGURATION_PAGE}: {missing:?}"
    );
}

/// The `toml` blocks of a page.
fn toml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, fence) if fence.starts_with("```toml") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// `top` with `over` laid on it, table by table.
fn merge(top: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (top.get_mut(&key), value) {
            (Some(toml::Value::Table(below)), toml::Value::Table(above)) => merge(below, above),
            (_, value) => {
                top.insert(key, value);
            }
        }
    }
}

#[test]
fn every_example_on_the_configuration_page_is_read_by_the_config_reader() {
    // A block shows one table at a time; the providers it may name come from here.
    const PROVIDERS: &str = r#"
        [llm.providers.local]
        type = "openai"
        endpoint = "http://127.0.0.1:8080/v1"
        default_model = "m"
        [llm.providers.openai]
        type = "openai"
    "#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let blocks = toml_blocks(&read(CONFIGURATION_PAGE));
    assert!(
        blocks.len() > 10,
        "{CONFIGURATION_PAGE} has {} toml blocks",
        blocks.len()
    );
    for block in blocks {
        let shown: toml::Table =
            toml::from_str(&block).unwrap_or_else(|err| panic!("not TOML:\n{block}\n{err}"));
        let mut whole: toml::Table = toml::from_str(PROVIDERS).unwrap();
        merge(&mut whole, shown);
        let text = toml::to_string(&whole).unwrap();
        // Every variable a block names is set; `~/` is the test's own directory.
        let home = dir.path().to_string_lossy().into_owned();
        let env = |name: &str| {
            Some(if name == "HOME" {
                home.clone()
            } else {
                "test-key".to_string()
            })
        };
        let config = Config::from_toml(&text, &path, &env, &Overrides::default())
            .unwrap_or_else(|err| panic!("the config reader refuses\n{block}\n{err}"));
        // Keys read past are fine when Crucible has them (the TUI's, `auto_reconnect`…),
        // as the page says; not when neither program knows them.
        let unknown: Vec<&str> = config
            .report
            .ignored
            .iter()
            .filter(|ignored| ignored.why == "neither crucible-agent nor Crucible knows this key")
            .map(|ignored| ignored.key.as_str())
            .collect();
        assert!(unknown.is_empty(), "unknown keys: {unknown:?} in\n{block}");
    }
}

/// The rows `doctor` prints as FAIL, each with the `fix:` line under it.
fn doctor_failures(report: &str) -> Vec<(String, Option<String>)> {
    let lines: Vec<&str> = report.lines().collect();
    let mut failures = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.split_whitespace().any(|word| word == "FAIL") {
            let fix = (lines.get(i + 1))
                .map(|next| next.trim())
                .and_then(|next| next.strip_prefix("fix:"))
                .map(|fix| fix.trim().to_string());
            failures.push((line.trim().to_string(), fix));
        }
    }
    failures
}

#[test]
fn every_configuration_example_copied_with_no_variable_set_gets_fixes_that_keep_the_file() {
    // A block that shows one table at a time gets a provider from here.
    const LOCAL: &str = r#"
        [llm.providers.local]
        type = "openai"
        endpoint = "http://127.0.0.1:9/v1"
        default_model = "m"
    "#;
    const ESSENTIALS: [&str; 3] = [
        "README.md block 2",
        "docs/src/configuration.md block 1",
        "config.sample.toml",
    ];
    let mut examples = Vec::new();
    for page in markdown_files() {
        let relative = page.strip_prefix(root()).unwrap().display().to_string();
        for (index, block) in toml_blocks(&read(&relative)).into_iter().enumerate() {
            examples.push((format!("{relative} block {}", index + 1), block));
        }
    }
    examples.push(("config.sample.toml".into(), read("config.sample.toml")));
    assert!(examples.len() > 20, "{} examples", examples.len());
    for (name, block) in examples {
        let shown: toml::Table =
            toml::from_str(&block).unwrap_or_else(|err| panic!("{name}: not TOML\n{err}"));
        let mut whole: toml::Table = toml::from_str(LOCAL).unwrap();
        merge(&mut whole, shown);
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join("config.toml");
        std::fs::write(&config, toml::to_string(&whole).unwrap()).unwrap();
        // No variable set: only what a process needs to run at all.
        let output = Command::new(env!("CARGO_BIN_EXE_crucible-agent"))
            .args(["--config", config.to_str().unwrap(), "doctor"])
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&output.stdout);
        for (row, fix) in doctor_failures(&report) {
            let fix = fix.unwrap_or_else(|| panic!("{name}: no fix under `{row}`\n{report}"));
            assert!(
                !fix.contains("--force") && !fix.contains("config init"),
                "{name}: a fix that would replace the user's file: {fix}\n{report}"
            );
            if row.starts_with("config ") {
                assert!(
                    row.contains("key `"),
                    "{name}: the error names no key: {row}"
                );
            }
        }
        // The essentials and the sample `config init` writes are a local
        // server's: nothing to fix in the file or the keys.
        if ESSENTIALS.contains(&name.as_str()) {
            let broken: Vec<_> = doctor_failures(&report)
                .into_iter()
                .filter(|(row, _)| row.starts_with("config ") || row.contains(" key "))
                .collect();
            assert!(broken.is_empty(), "{name}: {broken:?}\n{report}");
        }
    }
}

/// `crucible-agent ARGS --help`.
fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_crucible-agent"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?} --help failed");
    String::from_utf8(output.stdout).unwrap()
}

/// The subcommands and the flags a help text lists.
fn commands_and_flags(help: &str) -> (Vec<String>, Vec<String>) {
    let (mut commands, mut flags) = (Vec::new(), Vec::new());
    let mut section = "";
    for line in help.lines() {
        // Long help leaves a blank line between options.
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            section = line;
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        match section {
            "Commands:" if line.starts_with("  ") && !line.starts_with("   ") => {
                commands.push(first.to_string());
            }
            "Options:" => flags.extend(
                line.split([' ', ','])
                    .take_while(|word| {
                        word.is_empty() || word.starts_with('-') || word.starts_with('<')
                    })
                    .filter(|word| word.starts_with('-'))
                    .map(str::to_string),
            ),
            _ => {}
        }
    }
    (commands, flags)
}

#[test]
fn every_subcommand_and_flag_is_on_the_command_line_page() {
    let page = read(COMMAND_LINE_PAGE);
    let mut missing = Vec::new();
    let mut seen = 0;
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = pending.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let (commands, flags) = commands_and_flags(&help(&args));
        for flag in flags {
            seen += 1;
            if !has_word(&page, &flag) {
                missing.push(format!("crucible-agent {} {flag}", args.join(" ")));
            }
        }
        // clap's own `help` subcommand, at every level, is the page's `crucible-agent help`.
        for command in commands.into_iter().filter(|command| command != "help") {
            seen += 1;
            let mut deeper = path.clone();
            deeper.push(command);
            let line = format!("crucible-agent {}", deeper.join(" "));
            if !page.contains(&line) {
                missing.push(line);
            }
            pending.push(deeper);
        }
    }
    assert!(
        seen > 20,
        "the help texts list only {seen} subcommands and flags"
    );
    assert!(
        missing.is_empty(),
        "not on {COMMAND_LINE_PAGE}: {missing:?}"
    );
    assert!(
        page.contains("crucible-agent help"),
        "{COMMAND_LINE_PAGE} leaves out `help`"
    );
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = read("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 250, "README.md has {} lines", lines.len());
    let install = lines
        .iter()
        .position(|line| *line == "## Install")
        .expect("an Install section");
    assert!(install < 60, "Install starts at line {}", install + 1);
    let long: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].chars().count() > 200)
        .map(|i| i + 1)
        .collect();
    assert!(
        long.is_empty(),
        "README.md lines over 200 characters: {long:?}"
    );
    // Every page of the manual is in its table of contents.
    let summary = read("docs/src/SUMMARY.md");
    for page in std::fs::read_dir(root().join("docs/src")).unwrap() {
        let name = page.unwrap().file_name().into_string().unwrap();
        if name != "SUMMARY.md" && name.ends_with(".md") {
            assert!(
                summary.contains(&format!("]({name})")),
                "{name} is not in SUMMARY.md"
            );
        }
    }
}

/// The module paths of src/: `acp/router` for src/acp/router.rs.
fn modules(folder: &std::path::Path, prefix: &str, into: &mut Vec<String>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let module = format!("{prefix}{name}");
        if path.is_dir() {
            modules(&path, &format!("{module}/"), into);
        } else if path.extension() == Some("rs".as_ref()) {
            into.push(module);
        }
    }
}

#[test]
fn architecture_names_every_module() {
    let architecture = read("ARCHITECTURE.md");
    let table = &architecture[architecture.find("## Modules").expect("a Modules section")..];
    let mut all = Vec::new();
    modules(&root().join("src"), "", &mut all);
    all.sort();
    let missing: Vec<&String> = all
        .iter()
        .filter(|module| !table.contains(&format!("| `{module}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's module table lacks a line for {missing:?}"
    );
}
