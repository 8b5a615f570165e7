//! `/rewind` and `/context rollback` with files: the conversation goes back
//! and the files the agent wrote in the turns it takes back get their
//! earlier content again. The session keeps every content a file tool
//! replaced (`SessionFiles`, told by the tools' journal port); a file the
//! user changed since the agent wrote it is refused unless forced; every
//! rewind saves a checkpoint first, so `/rewind undo` can roll back to it
//! and put the files back as the rewind found them. Shell commands cannot
//! be undone: the report lists those that ran.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

use super::SessionActor;

use crate::commands::{RewindCommand, RewindFlags};
use crate::context::ContextOp;
use crate::context::rewind::{self, FileChange, FileHistory, FileStep, RestoredFile, Rewind};
use crate::store::{Blobs, Recorder, StoreError, content_hash};
use crate::tools::journal::{Before, FileJournal};
use crate::tools::{ConfinedPath, ToolContext, ToolError};
use crate::util::lock;

/// What a sensitive file's earlier content is recorded as (not a hash:
/// nothing is kept, nothing matches it).
const WITHHELD: &str = "withheld";

/// The name of the tool whose commands a rewind lists.
const SHELL: &str = "shell";

/// The session's file versions: told of each write, kept for rewinds.
pub(super) struct SessionFiles {
    blobs: Blobs,
    recorder: Option<Recorder>,
    history: Mutex<FileHistory>,
    /// The running turn's number, which each change is filed under.
    turn: AtomicU64,
}

impl SessionFiles {
    pub fn new(recorder: Option<&Recorder>, history: FileHistory) -> Self {
        Self {
            blobs: recorder.map_or_else(Blobs::in_memory, Recorder::blobs),
            recorder: recorder.cloned(),
            history: Mutex::new(history),
            turn: AtomicU64::new(0),
        }
    }

    pub fn set_turn(&self, turn: u64) {
        self.turn.store(turn, Ordering::SeqCst);
    }
}

impl FileJournal for SessionFiles {
    fn written(&self, path: &Path, before: Before, after: &[u8]) {
        let (before, before_kept) = match before {
            Before::Absent => (None, true),
            Before::Withheld => (Some(WITHHELD.to_string()), false),
            Before::Content(bytes) => {
                let (hash, kept) = self.blobs.put(&bytes);
                (Some(hash), kept)
            }
        };
        let change = FileChange {
            turn: self.turn.load(Ordering::SeqCst),
            path: path.to_path_buf(),
            before,
            before_kept,
            after: content_hash(after),
        };
        if let Some(recorder) = &self.recorder {
            recorder.file_changed(&change);
        }
        lock(&self.history).changed(change);
    }
}

/// What a rewind command does: its report, and the context operations to
/// apply (silently: the report says it all), then `reported` ones whose
/// own report is added.
#[derive(Default)]
pub(super) struct RewindJob {
    pub text: String,
    pub silent: Vec<ContextOp>,
    pub reported: Vec<ContextOp>,
}

/// What became of the files.
enum Outcome {
    /// The files written back, and those left as they are (not kept).
    Done(Vec<RestoredFile>, Vec<String>),
    /// Nothing changed: the reasons, as a report.
    Refused(String),
}

impl SessionActor {
    pub(super) fn rewind_command(&mut self, command: RewindCommand) -> RewindJob {
        match command {
            RewindCommand::Back { turns, flags } => self.rewind_back(turns, flags),
            RewindCommand::Undo(flags) => self.rewind_undo(flags),
        }
    }

    fn rewind_back(&mut self, turns: usize, flags: RewindFlags) -> RewindJob {
        let context = &self.conversation.context;
        let count = match context.rewind_count(turns) {
            Ok(count) => count,
            Err(err) => return text_only(format!("Nothing rewound: {err}.")),
        };
        let entries = context.entries();
        let gone = rewind::removed(entries, &entries[..entries.len() - count], SHELL);
        let command = format!("/rewind {turns}");
        let what = format!(
            "{} (from “{}”)",
            plural(gone.turns.len(), "turn"),
            gone.first_prompt.clone().unwrap_or_default()
        );
        let steps = lock(&self.services.files.history).plan(&gone.turns);
        self.run_rewind(&command, &what, steps, flags, &gone, |id| {
            vec![
                ContextOp::Checkpoint {
                    name: checkpoint_name(id),
                },
                ContextOp::Pop { count },
            ]
        })
        .unwrap_or_else(|job| job)
    }

    /// `/context rollback NAME`: the same file restore for the turns the
    /// rollback takes out. None: nothing to restore, a plain rollback.
    pub(super) fn rollback_command(&mut self, name: &str, flags: RewindFlags) -> RewindJob {
        let plain = RewindJob {
            reported: vec![ContextOp::Rollback {
                name: name.to_string(),
            }],
            ..RewindJob::default()
        };
        let context = &self.conversation.context;
        let Some(after) = context.checkpoint_entries(name) else {
            return plain;
        };
        let gone = rewind::removed(context.entries(), after, SHELL);
        let steps = lock(&self.services.files.history).plan(&gone.turns);
        if steps.is_empty() && !flags.dry_run {
            return plain;
        }
        let command = format!("/context rollback {name}");
        let what = format!("to checkpoint `{name}`");
        let rollback = ContextOp::Rollback {
            name: name.to_string(),
        };
        match self.run_rewind(&command, &what, steps, flags, &gone, |id| {
            vec![ContextOp::Checkpoint {
                name: checkpoint_name(id),
            }]
        }) {
            Ok(mut job) => {
                job.reported.push(rollback);
                job
            }
            Err(job) => job,
        }
    }

    /// Plans, checks and (unless a dry run) restores; `ops` are the
    /// context operations for the rewind of that id. Err: nothing applied.
    fn run_rewind(
        &mut self,
        command: &str,
        what: &str,
        steps: Vec<FileStep>,
        flags: RewindFlags,
        gone: &rewind::Removed,
        ops: impl FnOnce(u64) -> Vec<ContextOp>,
    ) -> Result<RewindJob, RewindJob> {
        let commands = &gone.commands;
        let cwd = self.services.cwd.clone();
        let shown = |path: &Path| crate::tools::display_path(path, &cwd);
        let mut text = String::new();
        if flags.dry_run {
            let _ = writeln!(text, "Dry run: `{command}` would go back {what}.");
            files_plan(&mut text, &steps, &shown, &self.services.tool_context);
            shell_note(&mut text, commands);
            let _ = write!(
                text,
                "Nothing changed. Apply it with `{command}` (add `--force` to overwrite files changed since the agent wrote them)."
            );
            return Err(text_only(text));
        }
        let (files, left) = match self.restore(&steps, flags, &shown, command) {
            Outcome::Refused(report) => {
                text.push_str(&report);
                shell_note(&mut text, commands);
                return Err(text_only(text));
            }
            Outcome::Done(files, left) => (files, left),
        };
        let mut history = lock(&self.services.files.history);
        let id = history.next_id();
        let record = Rewind {
            id,
            checkpoint: checkpoint_name(id),
            turns: gone.turns.clone(),
            files,
            at_turn: self.conversation.context.last_turn(),
        };
        let _ = writeln!(text, "Went back {what}.");
        restored_report(&mut text, &record.files, &left, &shown);
        shell_note(&mut text, commands);
        let _ = write!(text, "Undo it with `/rewind undo`.");
        if let Some(recorder) = &self.services.recorder {
            recorder.rewound(&record);
        }
        history.rewound(record);
        Ok(RewindJob {
            text,
            silent: ops(id),
            reported: Vec::new(),
        })
    }

    fn rewind_undo(&mut self, flags: RewindFlags) -> RewindJob {
        let last = lock(&self.services.files.history).last_rewind().cloned();
        let Some(last) = last else {
            return text_only("There is no rewind to undo.".into());
        };
        if self.conversation.context.last_turn() != last.at_turn {
            return text_only(
                "The last rewind can no longer be undone: a prompt came after it.".into(),
            );
        }
        if self
            .conversation
            .context
            .checkpoint_entries(&last.checkpoint)
            .is_none()
        {
            return text_only(format!(
                "The last rewind can no longer be undone: its checkpoint `{}` is gone.",
                last.checkpoint
            ));
        }
        let cwd = self.services.cwd.clone();
        let shown = |path: &Path| crate::tools::display_path(path, &cwd);
        let steps = last.undo_plan();
        let mut text = String::new();
        if flags.dry_run {
            text.push_str("Dry run: `/rewind undo` would bring the conversation back as it was before the last rewind.\n");
            files_plan(&mut text, &steps, &shown, &self.services.tool_context);
            text.push_str("Nothing changed. Apply it with `/rewind undo`.");
            return text_only(text);
        }
        match self.restore(&steps, flags, &shown, "/rewind undo") {
            Outcome::Refused(report) => text_only(report),
            Outcome::Done(files, left) => {
                text.push_str(
                    "Undid the last rewind: the conversation is back as it was before it.\n",
                );
                restored_report(&mut text, &files, &left, &shown);
                if let Some(recorder) = &self.services.recorder {
                    recorder.rewind_undone(last.id);
                }
                lock(&self.services.files.history).undone(last.id);
                text.pop();
                RewindJob {
                    text,
                    silent: vec![ContextOp::Rollback {
                        name: last.checkpoint,
                    }],
                    reported: Vec::new(),
                }
            }
        }
    }

    /// Checks every file, then writes them back; refuses (changing nothing)
    /// when one was changed by someone else since, unless forced.
    fn restore(
        &self,
        steps: &[FileStep],
        flags: RewindFlags,
        shown: &dyn Fn(&Path) -> String,
        command: &str,
    ) -> Outcome {
        let mut changed = Vec::new();
        let mut lost = Vec::new();
        let mut current = Vec::new();
        for step in steps {
            let now = match read(&self.services.tool_context, &step.path) {
                Ok(now) => now,
                Err(err) => {
                    return Outcome::Refused(format!(
                        "Refused: {} cannot be read ({err}). Nothing changed.\n",
                        shown(&step.path)
                    ));
                }
            };
            let hash = now.as_deref().map(content_hash);
            if hash != step.expected && hash != step.restore {
                changed.push(shown(&step.path));
            }
            let available = step.kept
                && (step.restore.as_deref()).is_none_or(|h| self.services.files.blobs.has(h));
            if !available && hash != step.restore {
                lost.push(shown(&step.path));
            }
            current.push((now, hash));
        }
        if (!changed.is_empty() || !lost.is_empty()) && !flags.force {
            let mut report = String::from("Refused: nothing changed.\n");
            if !changed.is_empty() {
                report
                    .push_str("Changed since the agent wrote them (by you or another program):\n");
                for path in &changed {
                    let _ = writeln!(report, "- {path}");
                }
            }
            if !lost.is_empty() {
                report.push_str("Their earlier content was not kept (too large, a sensitive file, or missing from the session's blobs):\n");
                for path in &lost {
                    let _ = writeln!(report, "- {path}");
                }
            }
            let _ = writeln!(
                report,
                "`{command} --force` overwrites the changed files and leaves those it cannot restore as they are."
            );
            return Outcome::Refused(report);
        }
        let mut done = Vec::new();
        for (step, (now, hash)) in steps.iter().zip(current) {
            let available = step.kept
                && (step.restore.as_deref()).is_none_or(|h| self.services.files.blobs.has(h));
            if hash == step.restore || !available {
                continue;
            }
            let replaced = now.map(|bytes| self.services.files.blobs.put(&bytes).0);
            if let Err(err) = self.put_back(step) {
                return Outcome::Refused(format!(
                    "Stopped: {} cannot be restored ({err}). Files restored before it stay restored:\n{}",
                    shown(&step.path),
                    done.iter()
                        .map(|f: &RestoredFile| format!("- {}\n", shown(&f.path)))
                        .collect::<String>()
                ));
            }
            done.push(RestoredFile {
                path: step.path.clone(),
                restored: step.restore.clone(),
                replaced,
            });
        }
        Outcome::Done(done, lost)
    }

    /// Puts one file back, through the same confinement as the file
    /// tools: a symlink swapped in since the agent wrote the file cannot
    /// send the restore outside the workspace.
    fn put_back(&self, step: &FileStep) -> Result<(), FileError> {
        let place = confine(&self.services.tool_context, &step.path)?;
        match &step.restore {
            None => Ok(place.remove()?),
            Some(hash) => {
                let bytes = self.services.files.blobs.get(hash)?;
                Ok(place.write(&bytes)?)
            }
        }
    }
}

/// Why a file a rewind looks at cannot be read or put back; told as the
/// cause says it.
#[derive(Debug, Error)]
enum FileError {
    /// Outside the session's roots now (a symlink swapped in, a root gone).
    #[error(transparent)]
    Confined(#[from] ToolError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Its earlier content is not in the store's blobs.
    #[error(transparent)]
    Blob(#[from] StoreError),
}

fn checkpoint_name(id: u64) -> String {
    format!("before-rewind-{id}")
}

fn text_only(text: String) -> RewindJob {
    RewindJob {
        text,
        ..RewindJob::default()
    }
}

/// A file's content now; None: it does not exist.
fn read(tools: &ToolContext, path: &Path) -> Result<Option<Vec<u8>>, FileError> {
    Ok(confine(tools, path)?.read_if_present()?)
}

/// A recorded path checked again against the session's roots, now.
fn confine(tools: &ToolContext, path: &Path) -> Result<ConfinedPath, FileError> {
    Ok(tools.confine(&path.to_string_lossy())?)
}

fn files_plan(
    out: &mut String,
    steps: &[FileStep],
    shown: &dyn Fn(&Path) -> String,
    tools: &ToolContext,
) {
    if steps.is_empty() {
        out.push_str("No file the agent wrote changes.\n");
        return;
    }
    out.push_str("Files:\n");
    for step in steps {
        let action = match (&step.restore, step.kept) {
            (None, _) => "removed (the agent created it)",
            (Some(_), true) => "restored to its earlier content",
            (Some(_), false) => {
                "cannot be restored (its earlier content was not kept: too large, or a sensitive file)"
            }
        };
        let now = read(tools, &step.path)
            .ok()
            .map(|now| now.as_deref().map(content_hash));
        let changed = match now {
            Some(hash) if hash != step.expected && hash != step.restore => {
                " (changed since the agent wrote it: refused without --force)"
            }
            Some(_) => "",
            None => " (cannot be read now)",
        };
        let _ = writeln!(out, "- {}: {action}{changed}", shown(&step.path));
    }
}

fn restored_report(
    out: &mut String,
    files: &[RestoredFile],
    left: &[String],
    shown: &dyn Fn(&Path) -> String,
) {
    if !left.is_empty() {
        out.push_str("Left as they are (their earlier content was not kept):\n");
        for path in left {
            let _ = writeln!(out, "- {path}");
        }
    }
    if files.is_empty() {
        if left.is_empty() {
            out.push_str("No file needed restoring.\n");
        }
        return;
    }
    out.push_str("Files:\n");
    for file in files {
        let action = match &file.restored {
            None => "removed",
            Some(_) => "restored",
        };
        let _ = writeln!(out, "- {}: {action}", shown(&file.path));
    }
}

/// Shell commands cannot be undone: said every time, with the commands.
fn shell_note(out: &mut String, commands: &[String]) {
    if commands.is_empty() {
        out.push_str(
            "No shell command ran in these turns (shell commands' effects cannot be undone).\n",
        );
        return;
    }
    out.push_str("Shell commands ran in these turns; their effects cannot be undone:\n");
    for command in commands {
        let _ = writeln!(out, "- `{command}`");
    }
}

fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("1 {word}")
    } else {
        format!("{count} {word}s")
    }
}
