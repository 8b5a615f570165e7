//! The part of YAML that card front matter uses: `key: value`, quoted
//! values, `[a, b]` lists, block lists (`- item`), one level of block maps
//! (`tools:` then `  bash: deny`), `>`/`|` block text and `#` comments.
//! Crucible's cards are read by a YAML library; these are the forms its
//! documented cards use, without a YAML dependency.

use super::CardError;

/// A front-matter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(String),
    List(Vec<String>),
    Map(Vec<(String, String)>),
}

impl Value {
    /// A list, from a list or from comma-separated text.
    pub fn into_list(self) -> Vec<String> {
        match self {
            Value::List(items) => items,
            Value::Text(text) => split_items(&text),
            Value::Map(entries) => entries.into_iter().map(|(key, _)| key).collect(),
        }
    }
}

/// A document that starts with front matter (a `---` line, `key: value`
/// lines, a closing `---`): its pairs and the text after it, trimmed.
pub fn split_document(text: &str, file: &str) -> Result<(Vec<(String, Value)>, String), CardError> {
    let text = text.trim_start_matches('\u{feff}');
    let lines: Vec<&str> = text.lines().collect();
    if lines.first().map(|line| line.trim()) != Some("---") {
        return Err(CardError::NoFrontMatter { file: file.into() });
    }
    let Some(close) = lines.iter().skip(1).position(|line| line.trim() == "---") else {
        return Err(CardError::Unclosed { file: file.into() });
    };
    let pairs = parse(&lines[1..=close], file)?;
    Ok((pairs, lines[close + 2..].join("\n").trim().to_string()))
}

/// The `key: value` pairs of the front matter's `lines` (between the `---`s).
pub fn parse(lines: &[&str], file: &str) -> Result<Vec<(String, Value)>, CardError> {
    let bad = |line: &str| CardError::BadLine {
        file: file.into(),
        line: line.trim().into(),
    };
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if is_blank(line) {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(bad(line));
        }
        let (key, rest) = line.split_once(':').ok_or_else(|| bad(line))?;
        let rest = strip_comment(rest.trim());
        // The lines that belong to this key: indented, or `- ` items.
        let start = i;
        while i < lines.len()
            && (is_blank(lines[i])
                || lines[i].starts_with([' ', '\t'])
                || lines[i].starts_with("- "))
        {
            i += 1;
        }
        let block: Vec<&str> = lines[start..i]
            .iter()
            .copied()
            .filter(|line| !is_blank(line))
            .collect();
        let value = match rest {
            ">" | ">-" | "|" | "|-" => {
                let separator = if rest.starts_with('>') { " " } else { "\n" };
                let text: Vec<&str> = block.iter().map(|line| line.trim()).collect();
                Value::Text(text.join(separator))
            }
            "" if block.is_empty() => Value::Text(String::new()),
            "" => block_value(&block).ok_or_else(|| bad(block[0]))?,
            _ if !block.is_empty() => return Err(bad(block[0])),
            inline if inline.starts_with('[') && inline.ends_with(']') => {
                Value::List(split_items(&inline[1..inline.len() - 1]))
            }
            text => Value::Text(unquote(text).to_string()),
        };
        pairs.push((key.trim().to_string(), value));
    }
    Ok(pairs)
}

/// A block under a key: all `- item` lines (a list) or all `key: value`
/// lines (a map); None for anything deeper.
fn block_value(block: &[&str]) -> Option<Value> {
    let trimmed: Vec<&str> = block.iter().map(|line| line.trim()).collect();
    if trimmed
        .iter()
        .all(|line| line.starts_with("- ") || *line == "-")
    {
        let items = trimmed
            .iter()
            .map(|line| unquote(strip_comment(line[1..].trim())).to_string())
            .filter(|item| !item.is_empty())
            .collect();
        return Some(Value::List(items));
    }
    let indent = |line: &str| line.len() - line.trim_start().len();
    let first = indent(block[0]);
    let mut entries = Vec::new();
    for line in block {
        let (key, value) = line.trim().split_once(':')?;
        let value = strip_comment(value.trim());
        if indent(line) != first || value.is_empty() {
            return None;
        }
        entries.push((unquote(key.trim()).to_string(), unquote(value).to_string()));
    }
    Some(Value::Map(entries))
}

fn is_blank(line: &str) -> bool {
    let line = line.trim();
    line.is_empty() || line.starts_with('#')
}

/// `value  # comment` → `value`, unless the `#` is inside quotes.
fn strip_comment(value: &str) -> &str {
    if value.starts_with(['"', '\'']) {
        return value;
    }
    match value.find(" #") {
        Some(at) => value[..at].trim_end(),
        None => value,
    }
}

fn split_items(text: &str) -> Vec<String> {
    text.split(',')
        .map(|item| unquote(item.trim()).to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

pub fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Vec<(String, Value)> {
        let lines: Vec<&str> = text.lines().collect();
        parse(&lines, "a.md").unwrap()
    }

    fn text(value: &str) -> Value {
        Value::Text(value.into())
    }

    fn list(items: &[&str]) -> Value {
        Value::List(items.iter().map(|i| i.to_string()).collect())
    }

    #[test]
    fn crucibles_documented_card_forms_read() {
        let pairs = parsed(
            "description: Explores and synthesizes   # why\n# a comment\ntools:\n  semantic_search: true\n  create_note: ask\n  bash: deny\nmcps:\n  - context7\n  - \"gh\"\ntags: [a, 'b']\nmax_turns: 8\nsummary: >\n  two\n  lines\nmcp_servers:\n- x\n",
        );
        assert_eq!(
            pairs,
            vec![
                ("description".into(), text("Explores and synthesizes")),
                (
                    "tools".into(),
                    Value::Map(vec![
                        ("semantic_search".into(), "true".into()),
                        ("create_note".into(), "ask".into()),
                        ("bash".into(), "deny".into()),
                    ])
                ),
                ("mcps".into(), list(&["context7", "gh"])),
                ("tags".into(), list(&["a", "b"])),
                ("max_turns".into(), text("8")),
                ("summary".into(), text("two lines")),
                ("mcp_servers".into(), list(&["x"])),
            ]
        );
        assert_eq!(
            parsed("name: \"a # b\"")[0].1,
            text("a # b"),
            "quoted # is text"
        );
        assert_eq!(text("read_file, grep").into_list(), ["read_file", "grep"]);
    }

    #[test]
    fn what_it_cannot_read_is_named() {
        for bad in [
            "  indented: first",
            "no colon",
            "tools:\n  bash:\n    deep: x",
            "name: x\n  stray",
        ] {
            let lines: Vec<&str> = bad.lines().collect();
            let err = parse(&lines, "a.md").unwrap_err();
            assert!(matches!(err, CardError::BadLine { .. }), "{bad:?}: {err}");
        }
    }
}
