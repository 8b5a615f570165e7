//! Tool calls written as text. Servers that do not parse a model's own
//! calling convention pass it through in the answer's text: Hermes
//! `<tool_call>` tags, Qwen3-Coder's `<function=…>` XML, Llama's bare JSON,
//! Mistral's `[TOOL_CALLS]`, gpt-oss's Harmony, a JSON call in a Markdown
//! fence. [`TextCallDecoder`] reads them out of the streamed text, one
//! dialect per module, and [`settle`] repairs every call of an answer
//! (names, arguments) before it runs.
//!
//! Precision first: only names of offered tools count (after repair), a
//! marker inside Markdown code is text, and calls stand only at the end of
//! the answer (a model that called a tool stops to wait for the result;
//! text after a "call" means it was talking about one). Streaming: only
//! what may start a call is held back; other text is shown as it comes.

mod fenced_json;
mod harmony;
mod hermes;
mod json;
mod llama_json;
mod mistral;
mod qwen_xml;
pub mod repair;

use serde_json::Value;

use crate::model::{Part, ToolDefinition};

/// A call read from text: an offered tool's name and its arguments as
/// JSON text (as written; [`settle`] repairs them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCall {
    pub name: String,
    pub arguments: String,
}

type Found = TextCall;

/// What the rest of an answer held once it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finished {
    /// Text still to show.
    pub text: String,
    /// The calls the answer ends with.
    pub calls: Vec<TextCall>,
    /// The text the calls were read from.
    pub source: String,
}

/// How an answer ended, which decides what a call being written means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerEnd {
    /// The model stopped by itself (or the stream broke off).
    Stopped,
    /// The output limit cut it off: a call being written counts as a call,
    /// and the model is told it was cut off.
    OutputLimit,
}

/// What becomes of the calls read from an answer's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextCalls {
    /// They are the answer's calls.
    Run,
    /// They are shown as the text they were: the answer has structured
    /// calls already, or did not finish.
    ShowAsText,
}

/// Whether more text may follow what a dialect is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextEnd {
    /// More may come: what looks cut short may still complete.
    Open,
    /// The answer ended: what is there is all there is.
    Reached,
}

impl Finished {
    /// The text to show and the call parts to add to an answer.
    pub fn into_parts(self, calls: TextCalls) -> (String, Vec<Part>) {
        if calls == TextCalls::ShowAsText {
            return (self.text + &self.source, Vec::new());
        }
        let calls = self
            .calls
            .into_iter()
            .map(|call| Part::ToolCall {
                id: format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..24]),
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        (self.text, calls)
    }
}

/// The tools a request offered, as the dialects need them.
#[derive(Debug, Clone, Default)]
pub struct Offered {
    tools: Vec<ToolDefinition>,
}

impl Offered {
    pub fn new(tools: &[ToolDefinition]) -> Self {
        Self {
            tools: tools.to_vec(),
        }
    }

    /// The offered tool `called` names, after repair.
    fn name(&self, called: &str) -> Option<String> {
        repair::tool_name(called, &self.tools).map(str::to_string)
    }

    fn schema(&self, name: &str) -> Option<&Value> {
        let tool = self.tools.iter().find(|tool| tool.name == name)?;
        Some(&tool.parameters)
    }
}

/// What a dialect made of the text at a marker.
#[derive(Debug)]
enum Attempt {
    /// Calls, and how many bytes of the text they took.
    Calls(Vec<Found>, usize),
    /// The text ends before it can tell.
    More,
    /// Not a call: the marker is text.
    No,
}

impl Attempt {
    fn map_used(self, f: impl FnOnce(usize) -> usize) -> Self {
        match self {
            Attempt::Calls(calls, used) => Attempt::Calls(calls, f(used)),
            other => other,
        }
    }
}

type Parser = fn(&str, TextEnd, &Offered) -> Attempt;

/// The markers that may start a call, with their dialect.
const MARKERS: &[(&str, Parser)] = &[
    (hermes::MARKER, hermes::parse),
    (qwen_xml::MARKER, qwen_xml::parse),
    (llama_json::MARKER, llama_json::parse_tagged),
    (mistral::MARKER, mistral::parse),
    (harmony::MARKERS[0], harmony::parse),
    (harmony::MARKERS[1], harmony::parse),
];

/// Tokens servers leave after a call (end of message, of turn); they are
/// not text after it.
const END_TOKENS: &[&str] = &[
    "<|call|>",
    "<|end|>",
    "<|return|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|im_end|>",
    "<|endoftext|>",
    "</s>",
    // Qwen3-Coder on Ollama: the opening tag is eaten as a special token,
    // the closing one is left.
    "</tool_call>",
];

/// One step of the scan.
enum Step {
    /// Show this many bytes as text.
    Show(usize),
    /// Calls read from this many bytes.
    Calls(Vec<Found>, usize),
    /// Whitespace or end tokens after calls: kept with them.
    Tail(usize),
    /// Text after calls: they were text too.
    Break,
    /// Hold the rest until more comes.
    Wait,
}

/// Markdown code the shown text is in: a marker there is an example.
#[derive(Debug, Default, Clone, Copy)]
struct Code {
    /// The backticks of an open fence.
    fence: Option<usize>,
    /// The backticks of an open inline span.
    inline: Option<usize>,
}

impl Code {
    fn open(&self) -> bool {
        self.fence.is_some() || self.inline.is_some()
    }
}

/// Reads tool calls out of an answer's text as it streams. Feed each text
/// delta to [`push`](Self::push) and show what it returns; at the end,
/// [`finish`](Self::finish) says what else to show and which calls the
/// answer made. The calls and the text shown are the same however the
/// text is split.
#[derive(Debug, Default)]
pub struct TextCallDecoder {
    offered: Offered,
    /// Text not yet decided: it may start a call.
    held: String,
    /// Calls read so far, standing only if the answer ends with them.
    calls: Vec<Found>,
    /// The text of `calls`, and the whitespace and end tokens after them.
    tail: String,
    code: Code,
    /// Whether anything but whitespace was shown.
    spoke: bool,
    /// The held length at which to look again: a long call is read again
    /// only each time it doubles, so reading it stays linear.
    retry_at: usize,
}

impl TextCallDecoder {
    /// A decoder for an answer to a request that offered `tools`.
    pub fn new(tools: &[ToolDefinition]) -> Self {
        Self {
            offered: Offered::new(tools),
            ..Self::default()
        }
    }

    /// The next piece of the answer's text; returns the text to show now
    /// (possibly empty: what may start a call is held back).
    pub fn push(&mut self, text: &str) -> String {
        self.held.push_str(text);
        if self.held.len() < self.retry_at {
            return String::new();
        }
        self.scan(TextEnd::Open)
    }

    /// The answer ended; cut off by the output limit, a call that was
    /// being written counts as a call (the model is told it was cut off)
    /// instead of text.
    pub fn finish(mut self, end: AnswerEnd) -> Finished {
        // Look again at what waited for more (see `retry_at`), so what is
        // held is the same however the text came.
        let mut text = self.scan(TextEnd::Open);
        if end == AnswerEnd::OutputLimit
            && let Some(call) = self.cut_call()
        {
            self.tail.push_str(&self.held);
            self.held.clear();
            self.calls.push(call);
        }
        text.push_str(&self.scan(TextEnd::Reached));
        Finished {
            text,
            calls: self.calls,
            source: self.tail,
        }
    }

    /// Scans what is held; `end` says whether more will come.
    fn scan(&mut self, end: TextEnd) -> String {
        let mut shown = String::new();
        let mut at = 0;
        while at < self.held.len() {
            let rest = &self.held[at..];
            let step = if self.calls.is_empty() {
                self.step_text(rest, end)
            } else {
                self.step_tail(rest, end)
            };
            match step {
                Step::Show(len) => {
                    let piece = self.held[at..at + len].to_string();
                    self.show(&piece, &mut shown);
                    at += len;
                }
                Step::Calls(calls, len) => {
                    self.tail.push_str(&self.held[at..at + len]);
                    self.calls.extend(calls);
                    at += len;
                }
                Step::Tail(len) => {
                    self.tail.push_str(&self.held[at..at + len]);
                    at += len;
                }
                Step::Break => {
                    let tail = std::mem::take(&mut self.tail);
                    self.calls.clear();
                    self.show(&tail, &mut shown);
                }
                Step::Wait => break,
            }
        }
        self.held.drain(..at);
        // What is held waits at a possible call; the scan's answer there
        // depends only on the text, so looking again later changes nothing
        // but when it is known.
        self.retry_at = self.held.len() * 2;
        shown
    }

    /// Plain text: show it up to the next byte that may start a call or
    /// change the Markdown state.
    fn step_text(&self, rest: &str, end: TextEnd) -> Step {
        let special = |b: &u8| matches!(b, b'<' | b'[' | b'{' | b'`' | b'\n');
        match rest.as_bytes().iter().position(special) {
            None => return Step::Show(rest.len()),
            Some(0) => {}
            Some(plain) => return Step::Show(plain),
        }
        match rest.as_bytes()[0] {
            b'\n' => Step::Show(1),
            b'`' => {
                let run = backticks(rest);
                if run == rest.len() && end == TextEnd::Open {
                    return Step::Wait;
                }
                if self.code.open() || run < 3 {
                    return Step::Show(run);
                }
                match fenced_json::parse(rest, run, end, &self.offered) {
                    Attempt::Calls(calls, used) => Step::Calls(calls, used),
                    Attempt::More => Step::Wait,
                    Attempt::No => Step::Show(run),
                }
            }
            _ if self.code.open() => Step::Show(1),
            b'{' if !self.spoke => {
                self.attempt(llama_json::parse_bare(rest, end, &self.offered), 1)
            }
            b'{' => Step::Show(1),
            _ => self.marker(rest, end).unwrap_or(Step::Show(1)),
        }
    }

    /// After calls: whitespace, separators and end tokens keep them
    /// standing, another call joins them, anything else is text.
    fn step_tail(&self, rest: &str, end: TextEnd) -> Step {
        let spaces = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_whitespace() || c == ';')
                .len();
        if spaces > 0 {
            return Step::Tail(spaces);
        }
        for token in END_TOKENS {
            if rest.starts_with(token) {
                return Step::Tail(token.len());
            }
            if end == TextEnd::Open && token.starts_with(rest) {
                return Step::Wait;
            }
        }
        let step = match rest.as_bytes()[0] {
            b'{' => self.attempt(llama_json::parse_bare(rest, end, &self.offered), 1),
            b'`' => {
                let run = backticks(rest);
                if run == rest.len() && end == TextEnd::Open {
                    Step::Wait
                } else if run >= 3 {
                    self.attempt(fenced_json::parse(rest, run, end, &self.offered), 1)
                } else {
                    Step::Show(1)
                }
            }
            _ => self.marker(rest, end).unwrap_or(Step::Show(1)),
        };
        match step {
            Step::Show(_) => Step::Break,
            other => other,
        }
    }

    /// The dialect whose marker `rest` starts with, or may start with.
    fn marker(&self, rest: &str, end: TextEnd) -> Option<Step> {
        for (marker, parse) in MARKERS {
            if rest.starts_with(marker) {
                return Some(self.attempt(parse(rest, end, &self.offered), 1));
            }
            if end == TextEnd::Open && marker.starts_with(rest) {
                return Some(Step::Wait);
            }
        }
        None
    }

    fn attempt(&self, attempt: Attempt, no: usize) -> Step {
        match attempt {
            Attempt::Calls(calls, used) => Step::Calls(calls, used),
            Attempt::More => Step::Wait,
            Attempt::No => Step::Show(no),
        }
    }

    /// Adds `text` to what is shown, following its Markdown code spans.
    fn show(&mut self, text: &str, shown: &mut String) {
        shown.push_str(text);
        self.spoke |= text.chars().any(|c| !c.is_whitespace());
        let mut rest = text;
        while let Some(at) = rest.find(['`', '\n']) {
            rest = &rest[at..];
            if rest.starts_with('\n') {
                self.code.inline = None;
                rest = &rest[1..];
                continue;
            }
            let run = backticks(rest);
            rest = &rest[run..];
            self.code = match self.code {
                Code {
                    fence: Some(open), ..
                } => Code {
                    fence: (run < open).then_some(open),
                    inline: None,
                },
                Code {
                    inline: Some(open), ..
                } => Code {
                    fence: None,
                    inline: (run != open).then_some(open),
                },
                _ if run >= 3 => Code {
                    fence: Some(run),
                    inline: None,
                },
                _ => Code {
                    fence: None,
                    inline: Some(run),
                },
            };
        }
    }

    /// At the output limit: the call being written when the answer was cut
    /// (the held text starts with a dialect's marker, then names an offered
    /// tool, and its dialect cannot read it whole), with the text as far as
    /// it came for arguments (which do not parse: the model is told).
    fn cut_call(&self) -> Option<Found> {
        let text = self.held.as_str();
        let starts = MARKERS.iter().any(|(marker, _)| text.starts_with(marker))
            || text.starts_with("```")
            || (text.starts_with('{') && (!self.spoke || !self.calls.is_empty()));
        if !starts || self.code.open() {
            return None;
        }
        let step = match self.calls.is_empty() {
            true => self.step_text(text, TextEnd::Reached),
            false => self.step_tail(text, TextEnd::Reached),
        };
        if matches!(step, Step::Calls(..)) {
            return None;
        }
        let name = json::string_after_key(text, "name")
            .or_else(|| after_marker(text, qwen_xml::MARKER, &['>']))
            .or_else(|| after_marker(text, "to=", &[' ', '<']))
            .or_else(|| after_marker(text, mistral::MARKER, &['[', '{']))?;
        let name = self.offered.name(name.trim())?;
        Some(Found {
            name,
            arguments: text.to_string(),
        })
    }
}

/// The run of backticks `text` starts with.
fn backticks(text: &str) -> usize {
    text.len() - text.trim_start_matches('`').len()
}

/// The text after `marker` in `text`, up to one of `end`.
fn after_marker(text: &str, marker: &str, end: &[char]) -> Option<String> {
    let start = text.find(marker)? + marker.len();
    let rest = &text[start..];
    let stop = rest.find(end).unwrap_or(rest.len());
    Some(rest[..stop].to_string())
}

/// A call of an answer, ready to run or answered with an error.
#[derive(Debug, Clone, PartialEq)]
pub struct SettledCall {
    pub id: String,
    pub name: String,
    /// The arguments, or what the model reads instead of a result.
    pub arguments: Result<Value, RejectedArguments>,
}

/// Why a call's arguments cannot run; the text is what the model reads
/// instead of a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RejectedArguments {
    /// The output limit cut the answer's last call short.
    #[error("{}", repair::cut_off(&.0.to_string()))]
    CutOff(repair::ArgumentsError),
    /// An offered tool: the error and the tool's schema, to call it right.
    #[error("{}", repair::unusable(&.error.to_string(), .tool))]
    Unusable {
        error: repair::ArgumentsError,
        tool: ToolDefinition,
    },
    /// A tool not offered (its name is the error the caller reports).
    #[error(transparent)]
    Invalid(repair::ArgumentsError),
}

/// Repairs the calls of an answer in place (a name that means one offered
/// tool, arguments that parse once repaired), so the conversation carries
/// them as they run; says for each what runs, or the error the model
/// reads: the parse error and the tool's schema, or for the last call of
/// an answer cut off by the output limit, that it was cut off.
pub fn settle(parts: &mut [Part], offered: &[ToolDefinition], end: AnswerEnd) -> Vec<SettledCall> {
    let last = parts
        .iter()
        .rposition(|part| matches!(part, Part::ToolCall { .. }));
    let mut settled = Vec::new();
    for (position, part) in parts.iter_mut().enumerate() {
        let Part::ToolCall {
            id,
            name,
            arguments,
        } = part
        else {
            continue;
        };
        if let Some(repaired) = repair::tool_name(name, offered) {
            *name = repaired.to_string();
        }
        let parsed = repair::arguments(arguments);
        if let Ok(value) = &parsed
            && serde_json::from_str::<Value>(arguments).ok().as_ref() != Some(value)
        {
            *arguments = value.to_string();
        }
        let parsed = parsed.map_err(|error| {
            let tool = offered.iter().find(|tool| tool.name == *name);
            match tool {
                _ if end == AnswerEnd::OutputLimit && Some(position) == last => {
                    RejectedArguments::CutOff(error)
                }
                Some(tool) => RejectedArguments::Unusable {
                    error,
                    tool: tool.clone(),
                },
                None => RejectedArguments::Invalid(error),
            }
        });
        settled.push(SettledCall {
            id: id.clone(),
            name: name.clone(),
            arguments: parsed,
        });
    }
    settled
}

#[cfg(test)]
mod tests;
