//! The files of a session directory: atomic metadata, append-only history,
//! and the lock that keeps two processes from writing one session.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::model::SessionId;

use super::disk::{FORMAT_VERSION, Metadata, MetadataIn, MetadataOut, StoredEvent};

const METADATA: &str = "metadata.json";
const HISTORY: &str = "history.jsonl";
const LOCK: &str = "lock";
/// The plan the model wrote (`write_plan`), as Markdown.
pub(super) const PLAN: &str = "plan.md";

impl Metadata {
    pub fn new(id: &SessionId, cwd: PathBuf, provider: &str, model: &str, mode: &str) -> Self {
        let now = now_rfc3339();
        Self {
            id: id.clone(),
            cwd,
            title: None,
            created_at: now.clone(),
            updated_at: now,
            provider: provider.to_string(),
            model: model.to_string(),
            agent: None,
            mode: mode.to_string(),
            permissions: BTreeMap::new(),
            parent_id: None,
            parent_tool_call_id: None,
            children: Vec::new(),
            additional_directories: Vec::new(),
            thought_level: None,
            system_prompt: None,
            forked_from: None,
            budgets: None,
            broken: None,
            archived: false,
        }
    }
}

/// Whether a session is set aside from the list (`session/archive`) or back in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveMark {
    Archived,
    Active,
}

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("no stored session `{0}`")]
    NotFound(SessionId),
    /// A file version (by its hash) the blobs do not hold. (Worded as it
    /// was when a session's `NotFound` told it.)
    #[error("no stored session `file version {0}`")]
    MissingBlob(String),
    #[error(
        "session `{id}` is open in another crucible-agent process{}; close it there first (or end that process)",
        pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
    )]
    Locked { id: SessionId, pid: Option<u32> },
    #[error("session `{0}` is archived; unarchive it (session/unarchive) before opening it")]
    Archived(SessionId),
    #[error(
        "session `{id}` was saved by a newer crucible-agent (session format {version}; this one reads up to {FORMAT_VERSION}); open it with that version or a later one"
    )]
    NewerFormat { id: SessionId, version: u32 },
    #[error(
        "session `{id}` cannot be read: {path} {detail}. Remove it with `crucible-agent sessions delete {id}`"
    )]
    Corrupt {
        id: SessionId,
        path: PathBuf,
        detail: String,
    },
    #[error("session `{id}` has no point `{name}` to start from")]
    UnknownCheckpoint { id: SessionId, name: String },
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_error<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The sessions directory of one data dir.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// An open session's files: the lock is held as long as this lives.
pub struct OpenSession {
    pub(super) dir: PathBuf,
    pub(super) history: File,
    _lock: File,
}

impl Store {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("sessions"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The data directory the sessions directory is in.
    pub fn data_dir(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// The directory of session `id`; ids that could leave the sessions
    /// directory are not ids of ours.
    fn session_dir(&self, id: &SessionId) -> Result<PathBuf, StoreError> {
        let id_text = id.as_str();
        let valid = !id_text.is_empty()
            && id_text.len() <= 128
            && id_text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(StoreError::NotFound(id.clone()));
        }
        Ok(self.dir.join(id_text))
    }

    /// A new session on disk, open (locked) for writing.
    pub fn create(&self, metadata: &Metadata) -> Result<OpenSession, StoreError> {
        let dir = self.session_dir(&metadata.id)?;
        fs::create_dir_all(&dir).map_err(io_error("cannot create", &dir))?;
        let open = open_locked(&metadata.id, &dir)?;
        write_metadata(&dir, metadata)?;
        Ok(open)
    }

    /// A copy of session `source` named `id` (not opened): its history as
    /// it stands, or up to its checkpoint `at` (the history then ends with
    /// that checkpoint), its settings, `forked_from` naming it. Its lineage
    /// and title stay with the source.
    pub fn fork(
        &self,
        source: &SessionId,
        id: &SessionId,
        at: Option<&str>,
    ) -> Result<(), StoreError> {
        let from = self.existing_dir(source)?;
        let mut metadata = read_metadata(source, &from)?;
        let history = from.join(HISTORY);
        let cut = match at {
            Some(name) => Some(history_until(source, &history, name)?),
            None => None,
        };
        let dir = self.session_dir(id)?;
        fs::create_dir_all(&dir).map_err(io_error("cannot create", &dir))?;
        let to = dir.join(HISTORY);
        if let Some(bytes) = cut {
            fs::write(&to, bytes).map_err(io_error("cannot write", &to))?;
        } else if history.is_file() {
            fs::copy(&history, &to).map_err(io_error("cannot copy", &to))?;
        }
        // The plan as it stands, when the whole history goes along (one cut
        // at a cursor may end before it was written).
        let plan = from.join(PLAN);
        if at.is_none() && plan.is_file() {
            let target = dir.join(PLAN);
            fs::copy(&plan, &target).map_err(io_error("cannot copy", &target))?;
        }
        // The file versions too, so rewinds work in the fork.
        if let Ok(blobs) = fs::read_dir(from.join("blobs")) {
            let to = dir.join("blobs");
            fs::create_dir_all(&to).map_err(io_error("cannot create", &to))?;
            for blob in blobs.flatten() {
                let target = to.join(blob.file_name());
                fs::copy(blob.path(), &target).map_err(io_error("cannot copy", &target))?;
            }
        }
        let now = now_rfc3339();
        metadata.id = id.clone();
        metadata.archived = false;
        metadata.forked_from = Some(source.clone());
        (metadata.created_at, metadata.updated_at) = (now.clone(), now);
        (
            metadata.title,
            metadata.parent_id,
            metadata.parent_tool_call_id,
        ) = (None, None, None);
        metadata.children.clear();
        write_metadata(&dir, &metadata)
    }

    /// A stored session, locked for this process, with its history.
    pub fn open(
        &self,
        id: &SessionId,
    ) -> Result<(OpenSession, Metadata, Vec<StoredEvent>), StoreError> {
        let dir = self.existing_dir(id)?;
        let metadata = read_metadata(id, &dir)?;
        if metadata.archived {
            return Err(StoreError::Archived(id.clone()));
        }
        let mut open = open_locked(id, &dir)?;
        let events = read_history(id, &dir, Some(&mut open.history))?;
        Ok((open, metadata, events))
    }

    /// Read a session without opening it (for display and for a second load
    /// in the process that has it open).
    pub fn read(&self, id: &SessionId) -> Result<(Metadata, Vec<StoredEvent>), StoreError> {
        let dir = self.existing_dir(id)?;
        let metadata = read_metadata(id, &dir)?;
        let events = read_history(id, &dir, None)?;
        Ok((metadata, events))
    }

    /// Session `id`'s Markdown plan and the file that holds it, when it has one.
    pub fn plan(&self, id: &SessionId) -> Result<Option<(String, PathBuf)>, StoreError> {
        let path = self.existing_dir(id)?.join(PLAN);
        match fs::read_to_string(&path) {
            Ok(markdown) => Ok(Some((markdown, path))),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(io_error("cannot read", &path)(err)),
        }
    }

    pub fn metadata(&self, id: &SessionId) -> Result<Metadata, StoreError> {
        read_metadata(id, &self.existing_dir(id)?)
    }

    /// Every readable session, newest first. Unreadable ones are skipped
    /// with a warning: one bad directory must not hide the others.
    pub fn list(&self) -> Vec<Metadata> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Vec::new(),
            Err(err) => {
                tracing::warn!(dir = %self.dir.display(), %err, "cannot list sessions");
                return Vec::new();
            }
        };
        let mut sessions: Vec<Metadata> = entries
            .flatten()
            .filter(|entry| entry.path().is_dir())
            .filter_map(|entry| {
                let id = SessionId::from(entry.file_name().to_string_lossy().into_owned());
                match read_metadata(&id, &entry.path()) {
                    Ok(metadata) => Some(metadata),
                    Err(err) => {
                        tracing::warn!(%err, "skipping a session that cannot be read");
                        None
                    }
                }
            })
            .collect();
        sort_newest_first(&mut sessions);
        sessions
    }

    /// Mark a session archived or not, its files untouched. Refused while
    /// a process has it open (its recorder would write the old mark back).
    pub fn set_archived(&self, id: &SessionId, mark: ArchiveMark) -> Result<(), StoreError> {
        let archived = mark == ArchiveMark::Archived;
        let dir = self.existing_dir(id)?;
        let _lock = open_locked(id, &dir)?;
        let mut metadata = read_metadata(id, &dir)?;
        if metadata.archived != archived {
            metadata.archived = archived;
            write_metadata(&dir, &metadata)?;
        }
        Ok(())
    }

    /// Remove a session from disk. Refused while another process has it open.
    pub fn delete(&self, id: &SessionId) -> Result<(), StoreError> {
        let dir = self.existing_dir(id)?;
        let lock = open_locked(id, &dir)?;
        // Moved out of `sessions/` first, in one rename: a request opening
        // the session meanwhile finds nothing (instead of creating its lock
        // file in a directory being removed), and the listing never shows
        // a half-removed session.
        let doomed = match self.dir.parent() {
            Some(data) => {
                let trash = data.join("deleted");
                fs::create_dir_all(&trash).map_err(io_error("cannot create", &trash))?;
                let doomed = trash.join(format!("{id}-{}", uuid::Uuid::new_v4().simple()));
                fs::rename(&dir, &doomed).map_err(io_error("cannot remove", &dir))?;
                doomed
            }
            None => dir,
        };
        drop(lock);
        fs::remove_dir_all(&doomed).map_err(io_error("cannot remove", &doomed))
    }

    fn existing_dir(&self, id: &SessionId) -> Result<PathBuf, StoreError> {
        let dir = self.session_dir(id)?;
        if dir.is_dir() {
            Ok(dir)
        } else {
            Err(StoreError::NotFound(id.clone()))
        }
    }
}

fn sort_newest_first(sessions: &mut [Metadata]) {
    sessions.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| b.id.cmp(&a.id))
    });
}

/// One page of a newest-first list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    pub sessions: Vec<Metadata>,
    pub next_cursor: Option<String>,
}

/// Page through `sessions` (newest first). The cursor names the last
/// session shown, so sessions created meanwhile do not shift the pages.
pub fn list_page(
    mut sessions: Vec<Metadata>,
    cwd: Option<&Path>,
    cursor: Option<&str>,
    limit: usize,
) -> ListPage {
    sort_newest_first(&mut sessions);
    if let Some(cwd) = cwd {
        sessions.retain(|s| s.cwd == cwd);
    }
    let start = match cursor.and_then(|c| c.split_once(' ')) {
        Some((updated_at, id)) => sessions
            .iter()
            .position(|s| (s.updated_at.as_str(), s.id.as_str()) < (updated_at, id))
            .unwrap_or(sessions.len()),
        None => 0,
    };
    let mut page: Vec<Metadata> = sessions.into_iter().skip(start).collect();
    let next_cursor = if page.len() > limit {
        page.truncate(limit);
        page.last().map(|s| format!("{} {}", s.updated_at, s.id))
    } else {
        None
    };
    ListPage {
        sessions: page,
        next_cursor,
    }
}

fn open_locked(id: &SessionId, dir: &Path) -> Result<OpenSession, StoreError> {
    let lock_path = dir.join(LOCK);
    let mut lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(io_error("cannot open", &lock_path))?;
    // flock: released by the kernel when the process dies, even by SIGKILL.
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = lock.read_to_string(&mut pid);
            return Err(StoreError::Locked {
                id: id.clone(),
                pid: pid.trim().parse().ok(),
            });
        }
        Err(fs::TryLockError::Error(err)) => return Err(io_error("cannot lock", &lock_path)(err)),
    }
    // The holder's pid, so the other process's error can name it.
    let _ = lock.set_len(0);
    let _ = write!(lock, "{}", std::process::id());
    let history_path = dir.join(HISTORY);
    let history = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(&history_path)
        .map_err(io_error("cannot open", &history_path))?;
    Ok(OpenSession {
        dir: dir.to_path_buf(),
        history,
        _lock: lock,
    })
}

fn read_metadata(id: &SessionId, dir: &Path) -> Result<Metadata, StoreError> {
    let path = dir.join(METADATA);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Err(StoreError::Corrupt {
                id: id.clone(),
                path,
                detail: "is missing".into(),
            });
        }
        Err(err) => return Err(io_error("cannot read", &path)(err)),
    };
    let file: MetadataIn = serde_json::from_slice(&bytes).map_err(|err| StoreError::Corrupt {
        id: id.clone(),
        path: path.clone(),
        detail: format!("is not valid session metadata ({err})"),
    })?;
    if file.format_version > FORMAT_VERSION {
        return Err(StoreError::NewerFormat {
            id: id.clone(),
            version: file.format_version,
        });
    }
    let metadata = file.metadata;
    if metadata.id != *id {
        return Err(StoreError::Corrupt {
            id: id.clone(),
            path,
            detail: format!("names another session (`{}`)", metadata.id),
        });
    }
    Ok(metadata)
}

pub(super) fn write_metadata(dir: &Path, metadata: &Metadata) -> Result<(), StoreError> {
    let file = MetadataOut {
        format_version: FORMAT_VERSION,
        metadata,
    };
    let mut bytes = serde_json::to_vec_pretty(&file).map_err(|err| StoreError::Io {
        action: "cannot encode",
        path: dir.join(METADATA),
        source: io::Error::other(err),
    })?;
    bytes.push(b'\n');
    write_atomic(dir, METADATA, &bytes).map(|_| ())
}

/// Temp file, fsync, rename, fsync the directory (where one can be): a reader sees the old
/// file or the new one, never half of one, even across a power cut.
pub(super) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, StoreError> {
    let path = dir.join(name);
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> io::Result<()> {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, &path)?;
        crate::platform::sync_dir(dir)
    };
    write().map_err(|err| {
        let _ = fs::remove_file(&temp);
        io_error("cannot write", &path)(err)
    })?;
    Ok(path)
}

/// Removes `name` from `dir` (a file that is not there is fine).
pub(super) fn remove_file(dir: &Path, name: &str) -> Result<(), StoreError> {
    let path = dir.join(name);
    match fs::remove_file(&path) {
        Ok(()) => crate::platform::sync_dir(dir).map_err(io_error("cannot remove", &path)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(io_error("cannot remove", &path)(err)),
    }
}

/// Every readable event of a history. With `repair`, a torn last line is
/// also cut off the file so the next append starts on a line of its own.
/// The history's lines up to and including the checkpoint named `name`.
fn history_until(id: &SessionId, path: &Path, name: &str) -> Result<Vec<u8>, StoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(err) => return Err(io_error("cannot read", path)(err)),
    };
    let mut end = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        end += line.len();
        if !line.ends_with(b"\n") {
            break;
        }
        if let Ok(StoredEvent::Context {
            op: super::disk::ContextOp::Checkpoint { name: found },
        }) = serde_json::from_slice::<StoredEvent>(line)
            && found == name
        {
            return Ok(bytes[..end].to_vec());
        }
    }
    Err(StoreError::UnknownCheckpoint {
        id: id.clone(),
        name: name.to_string(),
    })
}

fn read_history(
    id: &SessionId,
    dir: &Path,
    repair: Option<&mut File>,
) -> Result<Vec<StoredEvent>, StoreError> {
    let path = dir.join(HISTORY);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(err) => return Err(io_error("cannot read", &path)(err)),
    };
    let complete = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |last| last + 1);
    if complete < bytes.len() {
        tracing::warn!(
            session = %id,
            bytes = bytes.len() - complete,
            "the history's last line is incomplete (the agent stopped while writing it); skipping it"
        );
        if let Some(file) = repair {
            // Append mode writes at the end whatever the position; set_len cuts.
            let cut = file
                .set_len(complete as u64)
                .and_then(|()| file.seek(SeekFrom::End(0)).map(|_| ()));
            if let Err(err) = cut {
                tracing::warn!(session = %id, %err, "cannot cut the incomplete line");
            }
        }
    }
    let mut events = Vec::new();
    for (n, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<StoredEvent>(line) {
            Ok(StoredEvent::Unknown) => {
                tracing::debug!(session = %id, line = n + 1, "skipping an event kind this version does not know");
            }
            Ok(event) => events.push(event),
            Err(err) => {
                tracing::warn!(session = %id, line = n + 1, %err, "skipping an unreadable history line");
            }
        }
    }
    Ok(events)
}

pub use crate::util::now_rfc3339;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;
    use crate::store::StoredUpdate;

    fn meta(id: &str, updated: &str, cwd: &str) -> Metadata {
        let mut m = Metadata::new(&id.into(), PathBuf::from(cwd), "p", "m", "act");
        m.updated_at = updated.into();
        m
    }

    #[test]
    fn create_open_and_list_newest_first() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        assert!(store.list().is_empty());
        let old = meta("old", "2026-01-01T00:00:00.000Z", "/a");
        let new = meta("new", "2026-02-01T00:00:00.000Z", "/b");
        drop(store.create(&old).unwrap());
        drop(store.create(&new).unwrap());
        let ids: Vec<SessionId> = store.list().into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["new", "old"]);
        let (_open, metadata, events) = store.open(&"old".into()).unwrap();
        assert_eq!(metadata, old);
        assert!(events.is_empty());
        assert!(matches!(
            store.open(&"nope".into()),
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.open(&"../x".into()),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn an_archived_session_keeps_its_files_and_opens_once_unarchived() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        let metadata = Metadata::new(&"s".into(), PathBuf::from("/p"), "prov", "m", "act");
        drop(store.create(&metadata).unwrap());
        store
            .set_archived(&"s".into(), ArchiveMark::Archived)
            .unwrap();
        // Twice is fine, as the schema says.
        store
            .set_archived(&"s".into(), ArchiveMark::Archived)
            .unwrap();
        assert!(store.metadata(&"s".into()).unwrap().archived);
        assert!(matches!(
            store.open(&"s".into()),
            Err(StoreError::Archived(_))
        ));
        assert!(store.dir().join("s").join(METADATA).is_file());
        let (open, ..) = {
            store
                .set_archived(&"s".into(), ArchiveMark::Active)
                .unwrap();
            store.open(&"s".into()).unwrap()
        };
        // Not while it is open: its recorder would write its own mark back.
        assert!(matches!(
            store.set_archived(&"s".into(), ArchiveMark::Archived),
            Err(StoreError::Locked { .. })
        ));
        drop(open);
        assert!(matches!(
            store.set_archived(&"nope".into(), ArchiveMark::Archived),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn the_archived_mark_is_absent_unless_set_and_a_fork_drops_it() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        drop(
            store
                .create(&Metadata::new(
                    &"s".into(),
                    PathBuf::from("/p"),
                    "prov",
                    "m",
                    "act",
                ))
                .unwrap(),
        );
        let written = fs::read_to_string(store.dir().join("s").join(METADATA)).unwrap();
        assert!(!written.contains("archived"), "{written}");
        store
            .set_archived(&"s".into(), ArchiveMark::Archived)
            .unwrap();
        let written = fs::read_to_string(store.dir().join("s").join(METADATA)).unwrap();
        assert!(written.contains("\"archived\": true"), "{written}");
        assert!(written.contains("\"format_version\": 1"), "{written}");
        store.fork(&"s".into(), &"copy".into(), None).unwrap();
        assert!(!store.metadata(&"copy".into()).unwrap().archived);
    }

    #[test]
    fn a_fork_takes_the_file_versions_along() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        let metadata = Metadata::new(&"src".into(), PathBuf::from("/p"), "prov", "m", "act");
        let open = store.create(&metadata).unwrap();
        let blobs = super::super::Blobs::on_disk(open.dir.clone());
        let (hash, kept) = blobs.put(b"before\n");
        assert!(kept);
        drop(open);
        store.fork(&"src".into(), &"copy".into(), None).unwrap();
        let copied = super::super::Blobs::on_disk(store.dir().join("copy"));
        assert_eq!(copied.get(&hash).unwrap(), b"before\n");
    }

    #[test]
    fn a_fork_at_a_checkpoint_keeps_the_history_up_to_it() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        drop(store.create(&meta("src", "t", "/")).unwrap());
        let checkpoint = |name: &str| {
            StoredEvent::context(&crate::context::ContextOp::Checkpoint { name: name.into() })
        };
        let lines: String = ["a", "b", "c"]
            .iter()
            .map(|name| serde_json::to_string(&checkpoint(name)).unwrap() + "\n")
            .collect();
        fs::write(store.dir().join("src").join(HISTORY), lines).unwrap();
        store
            .fork(&"src".into(), &"copy".into(), Some("b"))
            .unwrap();
        let (_, events) = store.read(&"copy".into()).unwrap();
        assert_eq!(events, [checkpoint("a"), checkpoint("b")]);
        let err = store
            .fork(&"src".into(), &"other".into(), Some("z"))
            .unwrap_err();
        assert!(matches!(err, StoreError::UnknownCheckpoint { .. }), "{err}");
        assert!(
            !store.dir().join("other").exists(),
            "nothing is left of a refused fork"
        );
    }

    #[test]
    fn a_session_is_open_in_one_place_only() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        let held = store.create(&meta("s", "t", "/")).unwrap();
        let err = store.open(&"s".into()).err().unwrap();
        assert!(
            matches!(&err, StoreError::Locked { pid: Some(pid), .. } if *pid == std::process::id()),
            "{err}"
        );
        assert!(matches!(
            store.delete(&"s".into()),
            Err(StoreError::Locked { .. })
        ));
        drop(held);
        assert!(store.open(&"s".into()).is_ok());
        store.delete(&"s".into()).unwrap();
        assert!(!data.path().join("sessions/s").exists());
        assert!(matches!(
            store.delete(&"s".into()),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn corrupt_sessions_are_skipped_in_lists_and_named_on_load() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        drop(store.create(&meta("good", "t", "/")).unwrap());
        drop(store.create(&meta("bad", "t", "/")).unwrap());
        fs::write(store.dir().join("bad").join(METADATA), "{not json").unwrap();
        fs::create_dir_all(store.dir().join("empty")).unwrap();
        let ids: Vec<SessionId> = store.list().into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["good"]);
        let err = store.open(&"bad".into()).err().unwrap().to_string();
        assert!(
            err.contains("metadata.json") && err.contains("sessions delete bad"),
            "{err}"
        );
    }

    /// Metadata says which format the files are in: written with it, read
    /// without it as version 1, refused when newer than this version reads.
    #[test]
    fn the_format_version_is_written_and_a_newer_one_refused() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        let created = meta("s", "t", "/");
        drop(store.create(&created).unwrap());
        let path = store.dir().join("s").join(METADATA);
        let mut written: serde_json::Value =
            serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(written["format_version"], FORMAT_VERSION);

        written.as_object_mut().unwrap().remove("format_version");
        fs::write(&path, written.to_string()).unwrap();
        assert_eq!(store.metadata(&"s".into()).unwrap(), created);

        written["format_version"] = (FORMAT_VERSION + 1).into();
        fs::write(&path, written.to_string()).unwrap();
        let err = store.open(&"s".into()).err().unwrap();
        assert!(
            matches!(err, StoreError::NewerFormat { version, .. } if version == FORMAT_VERSION + 1)
        );
        assert!(err.to_string().contains("newer crucible-agent"), "{err}");
        assert!(store.list().is_empty());
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_cut_before_the_next_append() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        drop(store.create(&meta("s", "t", "/")).unwrap());
        let event = StoredEvent::prompt("t".into(), &Message::user_text("hi"));
        let mut line = serde_json::to_string(&event).unwrap();
        line.push('\n');
        line.push_str("garbage that is not json\n");
        line.push_str(r#"{"event":"update","update":{"kind":"agent_te"#);
        fs::write(store.dir().join("s").join(HISTORY), &line).unwrap();
        let (mut open, _, events) = store.open(&"s".into()).unwrap();
        assert_eq!(events, vec![event.clone()]);
        let more = StoredEvent::Update {
            update: StoredUpdate::AgentText { text: "yo".into() },
        };
        writeln!(open.history, "{}", serde_json::to_string(&more).unwrap()).unwrap();
        drop(open);
        let (_, events) = store.read(&"s".into()).unwrap();
        assert_eq!(events, vec![event, more]);
    }

    #[test]
    fn pages_follow_the_cursor_and_filter_by_cwd() {
        let sessions: Vec<Metadata> = (0..5)
            .map(|n| {
                meta(
                    &format!("s{n}"),
                    &format!("2026-01-0{}T00:00:00.000Z", n + 1),
                    if n % 2 == 0 { "/even" } else { "/odd" },
                )
            })
            .collect();
        let first = list_page(sessions.clone(), None, None, 2);
        let ids = |page: &ListPage| {
            page.sessions
                .iter()
                .map(|s| s.id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&first), ["s4", "s3"]);
        let second = list_page(sessions.clone(), None, first.next_cursor.as_deref(), 2);
        assert_eq!(ids(&second), ["s2", "s1"]);
        let third = list_page(sessions.clone(), None, second.next_cursor.as_deref(), 2);
        assert_eq!(ids(&third), ["s0"]);
        assert!(third.next_cursor.is_none());
        let even = list_page(sessions, Some(Path::new("/even")), None, 10);
        assert_eq!(ids(&even), ["s4", "s2", "s0"]);
    }
}
