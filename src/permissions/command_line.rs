//! A shell command line as `bash:` patterns see it: split into statements,
//! and each statement's command word resolved through the spellings a shell
//! accepts for the same program. Follows Crucible's
//! `config/components/permissions/normalize.rs`, so one `[permissions]`
//! section means the same in both programs. Best-effort by nature: text
//! cannot show aliases, functions or `$PATH` order (README, "Permissions").

/// A construct that can hide a command from the splitter; a line holding one
/// must not be allowed by a pattern written for the commands it does show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// `` `…` ``
    Backticks,
    /// `$(…)`, and `$((…))` with it.
    CommandSubstitution,
    /// `<(…)` or `>(…)`.
    ProcessSubstitution,
    /// A quote that never closes: every split after it is a guess.
    UnclosedQuote,
    /// `eval`, `sh -c`, `python -c`…: the program is data.
    Interpreter,
    /// The command word comes from an expansion (`$CMD -rf`).
    ExpandedCommand,
}

impl Unreadable {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Backticks => "backtick command substitution",
            Self::CommandSubstitution => "`$(...)` command substitution",
            Self::ProcessSubstitution => "process substitution",
            Self::UnclosedQuote => "an unclosed quote",
            Self::Interpreter => "a command run through another interpreter",
            Self::ExpandedCommand => "a command name built by expansion",
        }
    }
}

/// A command line split into statements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statements<'a> {
    /// Trimmed, empties dropped.
    pub statements: Vec<&'a str>,
    /// The first construct that makes the split untrustworthy.
    pub unreadable: Option<Unreadable>,
}

/// Split on `&&`, `||`, `;`, `|`, a backgrounding `&` and newlines, outside
/// quotes; report substitutions and an unclosed quote.
pub fn split(input: &str) -> Statements<'_> {
    let bytes = input.as_bytes();
    let mut statements: Vec<&str> = Vec::new();
    let mut unreadable = None;
    let mut start = 0;
    let mut quote = Quote::Outside;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        // `\` escapes the next byte except inside single quotes; `\` and a
        // newline outside quotes join two lines, and end the statement here
        // so the `\` does not hide the next command from a pattern.
        if byte == b'\\' && quote != Quote::Single {
            if bytes.get(i + 1) == Some(&b'\n') && quote == Quote::Outside {
                push(input, start, i, &mut statements);
                start = i + 2;
            }
            i += 2;
            continue;
        }
        if byte == b'"' && quote != Quote::Single {
            quote = quote.toggled(Quote::Double);
            i += 1;
            continue;
        }
        if byte == b'\'' && quote != Quote::Double {
            quote = quote.toggled(Quote::Single);
            i += 1;
            continue;
        }
        if quote != Quote::Single && unreadable.is_none() {
            unreadable = substitution_at(bytes, i, quote);
        }
        if quote != Quote::Outside {
            i += 1;
            continue;
        }
        let next = bytes.get(i + 1).copied();
        if (byte == b'&' && next == Some(b'&')) || (byte == b'|' && next == Some(b'|')) {
            push(input, start, i, &mut statements);
            start = i + 2;
            i += 2;
        } else if matches!(byte, b';' | b'|' | b'\n') || (byte == b'&' && backgrounds(bytes, i)) {
            push(input, start, i, &mut statements);
            start = i + 1;
            i += 1;
        } else {
            i += 1;
        }
    }
    push(input, start, input.len(), &mut statements);
    if quote != Quote::Outside && unreadable.is_none() {
        unreadable = Some(Unreadable::UnclosedQuote);
    }
    Statements {
        statements,
        unreadable,
    }
}

/// The quotes the splitter is inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Outside,
    Single,
    Double,
}

impl Quote {
    /// After a quote character of kind `mark`: it opens or closes.
    fn toggled(self, mark: Quote) -> Quote {
        if self == mark { Quote::Outside } else { mark }
    }
}

/// `input[from..to]`, trimmed, unless empty.
fn push<'a>(input: &'a str, from: usize, to: usize, statements: &mut Vec<&'a str>) {
    let statement = input[from..to].trim();
    if !statement.is_empty() {
        statements.push(statement);
    }
}

/// Whether the `&` at `i` ends a statement: not `&>`, `>&` or `<&` (redirections).
fn backgrounds(bytes: &[u8], i: usize) -> bool {
    bytes.get(i + 1) != Some(&b'>') && !(i > 0 && matches!(bytes[i - 1], b'>' | b'<'))
}

/// A substitution starting at `i`. Redirection (`>`) hides no command and is
/// not reported: an allowed command may still write where it likes.
fn substitution_at(bytes: &[u8], i: usize, quote: Quote) -> Option<Unreadable> {
    let opens = bytes.get(i + 1) == Some(&b'(');
    match bytes[i] {
        b'`' => Some(Unreadable::Backticks),
        b'$' if opens => Some(Unreadable::CommandSubstitution),
        b'<' | b'>' if opens && quote != Quote::Double => Some(Unreadable::ProcessSubstitution),
        _ => None,
    }
}

/// What a wrapper's mandatory argument looks like, so `timeout 5 rm`
/// resolves to `rm` and `timeout rm` does too.
#[derive(Clone, Copy)]
enum Positional {
    None,
    /// `5`, `1.5m`
    Duration,
    /// `/tmp/lock`, or a descriptor number
    Path,
    /// `0x3`, `1,2`
    Mask,
}

impl Positional {
    fn takes(self, token: &str) -> bool {
        match self {
            Self::None => false,
            Self::Duration => {
                let digits = token.trim_end_matches(['s', 'm', 'h', 'd']);
                !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
            }
            Self::Path => token.contains('/') || token.chars().all(|c| c.is_ascii_digit()),
            Self::Mask => {
                token.starts_with("0x") || token.chars().all(|c| c.is_ascii_digit() || c == ',')
            }
        }
    }
}

/// Programs that run the command given as their arguments: (name, options
/// that take a value, mandatory positional). Crucible's table.
const WRAPPERS: &[(&str, &[&str], Positional)] = &[
    ("command", &[], Positional::None),
    ("builtin", &[], Positional::None),
    ("exec", &[], Positional::None),
    ("env", &["-u", "-C", "--unset", "--chdir"], Positional::None),
    ("nohup", &[], Positional::None),
    ("setsid", &[], Positional::None),
    ("time", &["-o", "-f"], Positional::None),
    (
        "timeout",
        &["-s", "-k", "--signal", "--kill-after"],
        Positional::Duration,
    ),
    ("nice", &["-n", "--adjustment"], Positional::None),
    (
        "ionice",
        &["-c", "-n", "-p", "--class", "--classdata", "--pid"],
        Positional::None,
    ),
    (
        "stdbuf",
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        Positional::None,
    ),
    (
        "sudo",
        &[
            "-u", "-g", "-p", "-C", "-h", "--user", "--group", "--prompt",
        ],
        Positional::None,
    ),
    ("doas", &["-u", "-C"], Positional::None),
    ("watch", &["-n", "-d", "--interval"], Positional::None),
    ("parallel", &["-j", "-n", "--jobs"], Positional::None),
    ("strace", &["-o", "-p", "-e", "-s"], Positional::None),
    ("ltrace", &["-o", "-p", "-e"], Positional::None),
    ("unshare", &["--map-user", "--map-group"], Positional::None),
    (
        "runuser",
        &["-u", "-g", "--user", "--group"],
        Positional::None,
    ),
    (
        "systemd-run",
        &["-u", "-p", "--unit", "--property"],
        Positional::None,
    ),
    ("flock", &["-w", "-E", "--timeout"], Positional::Path),
    ("chroot", &["--userspec", "--groups"], Positional::Path),
    ("taskset", &["-p", "--pid"], Positional::Mask),
    (
        "xargs",
        &["-a", "-E", "-I", "-L", "-n", "-P", "-s", "-d", "--replace"],
        Positional::None,
    ),
];

/// Programs that take their program as data: reported, never guessed at.
const INTERPRETERS: &[&str] = &[
    "eval",
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "busybox",
    "nix-shell",
    "su",
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "deno",
    "bun",
    "php",
    "awk",
];

/// One statement with wrappers (`sudo`, `env X=1`, `timeout 5`…), grouping
/// (`(`, `{`, `!`), assignments and quoting stripped and the command word
/// reduced to its basename: `sudo /bin/rm -rf x` is `rm -rf x`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub command: String,
    pub unreadable: Option<Unreadable>,
}

pub fn resolve(statement: &str) -> Resolved {
    let flattened = statement.replace(['\t', '\n', '\r', '\u{b}', '\u{c}'], " ");
    let mut tokens: Vec<&str> = flattened.split_whitespace().collect();
    let mut unreadable = None;
    loop {
        while let Some(first) = tokens.first().copied() {
            let stripped = first.trim_start_matches(['(', '{', '!']);
            if stripped == first {
                break;
            }
            if stripped.is_empty() {
                tokens.remove(0);
            } else {
                tokens[0] = stripped;
            }
        }
        let Some(&head) = tokens.first() else { break };
        if is_assignment(head) {
            tokens.remove(0);
            continue;
        }
        let unquoted = unquote(head);
        let base = unquoted.rsplit('/').next().unwrap_or(&unquoted);
        if INTERPRETERS.contains(&base) {
            unreadable = Some(Unreadable::Interpreter);
            break;
        }
        let Some((_, value_options, positional)) =
            WRAPPERS.iter().find(|(name, _, _)| *name == base)
        else {
            break;
        };
        tokens.remove(0);
        while let Some(&option) = tokens.first() {
            if option == "--" {
                tokens.remove(0);
                break;
            }
            if !option.starts_with('-') || option == "-" {
                break;
            }
            tokens.remove(0);
            if value_options.contains(&option) && !tokens.is_empty() {
                tokens.remove(0);
            }
        }
        if tokens.len() > 1 && positional.takes(tokens[0]) {
            tokens.remove(0);
        }
    }
    let Some(head) = tokens.first() else {
        return Resolved {
            command: statement.trim().to_string(),
            unreadable,
        };
    };
    if head.contains('$') {
        unreadable = unreadable.or(Some(Unreadable::ExpandedCommand));
    }
    let unquoted = unquote(head);
    let base = unquoted.rsplit('/').next().unwrap_or(&unquoted);
    let command = if base.is_empty() {
        tokens.join(" ")
    } else {
        std::iter::once(base)
            .chain(tokens[1..].iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    };
    Resolved {
        command,
        unreadable,
    }
}

/// Quote removal, as a shell does before it looks a command up: `\rm`,
/// `"rm"` and `r''m` are all `rm`.
fn unquote(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    let (mut in_single, mut in_double) = (false, false);
    while let Some(c) = chars.next() {
        match c {
            '\'' if !in_double => in_single = !in_single,
            '"' if !in_single => in_double = !in_double,
            '\\' if !in_single => out.extend(chars.next()),
            _ => out.push(c),
        }
    }
    out
}

/// `NAME=value` before a command.
fn is_assignment(token: &str) -> bool {
    token.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_on_every_operator_outside_quotes() {
        let cases: &[(&str, &[&str])] = &[
            ("cargo test && rm -rf /", &["cargo test", "rm -rf /"]),
            ("a && b || c; d | e", &["a", "b", "c", "d", "e"]),
            ("git log\ncurl x", &["git log", "curl x"]),
            ("git status & rm x", &["git status", "rm x"]),
            ("cargo test 2>&1", &["cargo test 2>&1"]),
            ("ls &> out", &["ls &> out"]),
            ("echo \"a && b\"", &["echo \"a && b\""]),
            ("echo 'a; b'", &["echo 'a; b'"]),
            (r#"echo "\"" && rm x"#, &[r#"echo "\"""#, "rm x"]),
            ("git log \\\nrm x", &["git log", "rm x"]),
            ("cmd;", &["cmd"]),
            ("", &[]),
        ];
        for (line, expected) in cases {
            let split = split(line);
            assert_eq!(split.statements, *expected, "{line:?}");
            assert_eq!(split.unreadable, None, "{line:?}");
        }
    }

    #[test]
    fn substitutions_and_open_quotes_are_reported() {
        for (line, expected) in [
            ("git log $(curl evil)", Unreadable::CommandSubstitution),
            ("echo \"$(date)\"", Unreadable::CommandSubstitution),
            ("git log `curl evil`", Unreadable::Backticks),
            ("diff <(ls a) b", Unreadable::ProcessSubstitution),
            ("echo 'unclosed", Unreadable::UnclosedQuote),
        ] {
            assert_eq!(split(line).unreadable, Some(expected), "{line:?}");
        }
        assert_eq!(split("echo '$(date)'").unreadable, None);
        assert_eq!(split("echo hi > /tmp/x").unreadable, None);
    }

    #[test]
    fn command_words_are_followed_through_wrappers_and_quoting() {
        for (statement, expected) in [
            ("sudo rm -rf /x", "rm -rf /x"),
            ("sudo -u root rm x", "rm x"),
            ("/bin/rm x", "rm x"),
            ("\\rm x", "rm x"),
            ("\"rm\" x", "rm x"),
            ("env FOO=1 rm x", "rm x"),
            ("FOO=1 rm x", "rm x"),
            ("timeout 5 rm x", "rm x"),
            ("timeout rm x", "rm x"),
            ("(rm x", "rm x"),
            ("xargs rm", "rm"),
            ("rm\t-rf x", "rm -rf x"),
            ("sudo -- rm x", "rm x"),
            ("cargo test", "cargo test"),
        ] {
            let resolved = resolve(statement);
            assert_eq!(resolved.command, expected, "{statement:?}");
            assert_eq!(resolved.unreadable, None, "{statement:?}");
        }
        for (statement, expected) in [
            ("sh -c 'rm x'", Unreadable::Interpreter),
            ("eval \"$X\"", Unreadable::Interpreter),
            ("sudo python3 -c 'x'", Unreadable::Interpreter),
            ("$CMD -rf /", Unreadable::ExpandedCommand),
        ] {
            assert_eq!(
                resolve(statement).unreadable,
                Some(expected),
                "{statement:?}"
            );
        }
    }
}
