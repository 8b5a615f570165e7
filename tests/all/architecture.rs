//! The house rule of ARCHITECTURE.md: every import points down the layer
//! table. Reads each `crate::…` path in src/ (comments aside) and fails on
//! one that reaches a module of a higher layer, or a module of the same
//! layer that the table does not draw. `house` holds the rules inside a
//! layer: no circle within a folder, short functions, files of one concept.

mod house;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level modules of src/ and their layer, lowest first.
const LAYERS: &[(&str, u8)] = &[
    // 0 core: the conversation model, agent events, the client port.
    ("model", 0),
    ("events", 0),
    ("client", 0),
    ("util", 0),
    ("platform", 0),
    // 1 domains
    ("providers", 1),
    ("tools", 1),
    ("mcp", 1),
    ("context", 1),
    ("permissions", 1),
    ("store", 1),
    ("prompt", 1),
    ("agents", 1),
    ("modes", 1),
    ("skills", 1),
    // 2 settings: composes the domains' own settings types
    ("config", 2),
    // 3 the agent loop
    ("agent_loop", 3),
    // 4 sessions
    ("session", 4),
    ("commands", 4),
    // 5 the ACP adapter
    ("acp", 5),
    ("transport", 5),
    // 6 the edge
    ("cli", 6),
    ("main", 6),
    ("lib", 6),
];

/// Imports between modules of one layer, each drawn in ARCHITECTURE.md
/// (they must not form a circle).
const SIDEWAYS: &[(&str, &str)] = &[
    ("client", "model"),
    ("client", "events"),
    ("client", "util"),
    ("events", "model"),
    ("context", "providers"),
    ("mcp", "tools"),
    ("permissions", "tools"),
    ("permissions", "modes"),
    ("store", "context"),
    ("skills", "tools"),
    ("skills", "agents"),
    ("session", "commands"),
    ("acp", "transport"),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, layer)| *layer)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The modules a line of code names as `crate::NAME`.
fn named_modules(line: &str) -> Vec<&str> {
    let code = line.split("//").next().unwrap_or("");
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // `crucible_agent::` is not `crate::`; only a whole word counts.
            !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, _)| {
            let rest = &code[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

#[test]
fn every_import_points_down_the_layer_table() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let from = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        let Some(from_layer) = layer(&from) else {
            wrong.push(format!(
                "{}: module `{from}` is not in the layer table",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for to in named_modules(line) {
                if to == from || to == "self" || to.is_empty() {
                    continue;
                }
                seen.insert((from.clone(), to.to_string()));
                let allowed = match layer(to) {
                    Some(to_layer) if to_layer < from_layer => true,
                    Some(to_layer) if to_layer == from_layer => {
                        SIDEWAYS.contains(&(from.as_str(), to))
                    }
                    _ => false,
                };
                if !allowed {
                    wrong.push(format!(
                        "{}:{}: `{from}` (layer {from_layer}) imports `{to}` (layer {:?}): {}",
                        relative.display(),
                        n + 1,
                        layer(to),
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up or sideways without being drawn (move the type down, or draw the edge in ARCHITECTURE.md and SIDEWAYS):\n{}",
        wrong.join("\n")
    );
    // The table draws only edges that exist, so it stays a true picture.
    for (from, to) in SIDEWAYS {
        assert!(
            seen.contains(&(from.to_string(), to.to_string())),
            "SIDEWAYS draws `{from}` → `{to}`, which no code uses: remove it"
        );
    }
}

#[test]
fn the_reader_finds_crate_paths_and_skips_comments() {
    assert_eq!(
        named_modules("use crate::model::{Message, Part};"),
        ["model"]
    );
    assert_eq!(
        named_modules("    let x = crate::store::now(); crate::util::lock(&m);"),
        ["store", "util"]
    );
    assert!(named_modules("/// see [`crate::commands`]").is_empty());
    assert!(named_modules("use crucible_agent::config::Config;").is_empty());
}

/// ACP types live only in the adapter: a new protocol version touches
/// `acp/` and `transport/`, nothing else.
#[test]
fn only_the_adapter_speaks_acp() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative.components().next().unwrap().as_os_str();
        let adapter = ["acp", "acp.rs", "transport", "transport.rs"]
            .iter()
            .any(|name| top == *name);
        if adapter {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("agent_client_protocol_schema") {
                wrong.push(format!("{}:{}: {}", relative.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the ACP schema outside acp/ and transport/ (translate at the adapter instead):\n{}",
        wrong.join("\n")
    );
}
