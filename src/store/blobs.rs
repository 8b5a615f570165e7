//! File versions, content-addressed: `sessions/<id>/blobs/<sha256>`, one
//! file per distinct content (a content kept twice is written once). A
//! content past [`MAX_BLOB_BYTES`], or past the session's
//! [`MAX_SESSION_BYTES`] in all, is not kept: its hash is still known, so
//! a rewind can tell the file changed, but it cannot put that content back.
//! A session kept in memory only keeps its blobs in memory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::StoreError;
use crate::util::lock;

/// The largest file content kept for a rewind.
pub const MAX_BLOB_BYTES: usize = 4 * 1024 * 1024;
/// The most a session keeps in all.
pub const MAX_SESSION_BYTES: u64 = 256 * 1024 * 1024;

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A session's file versions. Clones share the store.
#[derive(Clone)]
pub struct Blobs {
    inner: Arc<Inner>,
}

struct Inner {
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// Bytes kept so far (counted from the directory on first use).
    used: Mutex<Option<u64>>,
}

impl std::fmt::Debug for Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blobs")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

impl Blobs {
    /// The blobs of the session stored in `session_dir`.
    pub fn on_disk(session_dir: PathBuf) -> Self {
        Self::new(Some(session_dir.join("blobs")))
    }

    pub fn in_memory() -> Self {
        Self::new(None)
    }

    fn new(dir: Option<PathBuf>) -> Self {
        Self {
            inner: Arc::new(Inner {
                dir,
                memory: Mutex::default(),
                used: Mutex::default(),
            }),
        }
    }

    /// Keep `bytes`: their hash, and whether they are kept (false: past the
    /// caps, or the disk refused them).
    pub fn put(&self, bytes: &[u8]) -> (String, bool) {
        let hash = content_hash(bytes);
        if self.has(&hash) {
            return (hash, true);
        }
        let size = bytes.len() as u64;
        let mut used = lock(&self.inner.used);
        let so_far = *used.get_or_insert_with(|| self.count());
        if bytes.len() > MAX_BLOB_BYTES || so_far + size > MAX_SESSION_BYTES {
            return (hash, false);
        }
        let kept = match &self.inner.dir {
            None => {
                lock(&self.inner.memory).insert(hash.clone(), Arc::new(bytes.to_vec()));
                true
            }
            Some(dir) => match write_blob(dir, &hash, bytes) {
                Ok(()) => true,
                Err(err) => {
                    tracing::warn!(%err, "cannot keep a file version for rewinds");
                    false
                }
            },
        };
        if kept {
            *used = Some(so_far + size);
        }
        (hash, kept)
    }

    /// The content named `hash`.
    pub fn get(&self, hash: &str) -> Result<Vec<u8>, StoreError> {
        if let Some(bytes) = lock(&self.inner.memory).get(hash) {
            return Ok(bytes.to_vec());
        }
        let Some(dir) = &self.inner.dir else {
            return Err(StoreError::MissingBlob(hash.to_string()));
        };
        let path = blob_path(dir, hash)?;
        std::fs::read(&path).map_err(|source| StoreError::Io {
            action: "cannot read the file version",
            path,
            source,
        })
    }

    /// Whether the content named `hash` is kept.
    pub fn has(&self, hash: &str) -> bool {
        if lock(&self.inner.memory).contains_key(hash) {
            return true;
        }
        (self.inner.dir.as_ref())
            .and_then(|dir| blob_path(dir, hash).ok())
            .is_some_and(|path| path.is_file())
    }

    fn count(&self) -> u64 {
        let Some(Ok(entries)) = self.inner.dir.as_ref().map(std::fs::read_dir) else {
            return 0;
        };
        entries
            .flatten()
            .filter_map(|entry| entry.metadata().ok())
            .map(|meta| meta.len())
            .sum()
    }
}

/// A hash names a file of the blobs directory, and nothing else.
fn blob_path(dir: &std::path::Path, hash: &str) -> Result<PathBuf, StoreError> {
    if hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(dir.join(hash))
    } else {
        Err(StoreError::MissingBlob(hash.to_string()))
    }
}

/// Written beside and renamed in: a blob is whole or absent.
fn write_blob(dir: &std::path::Path, hash: &str, bytes: &[u8]) -> Result<(), StoreError> {
    let io = |action: &'static str, path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    let path = blob_path(dir, hash)?;
    let partial = dir.join(format!(".{hash}.partial"));
    std::fs::write(&partial, bytes).map_err(io("cannot write", &partial))?;
    std::fs::rename(&partial, &path).map_err(io("cannot rename", &path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_are_kept_once_by_hash_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::on_disk(dir.path().to_path_buf());
        let (hash, kept) = blobs.put(b"hello\n");
        assert!(kept);
        assert_eq!(
            hash,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(blobs.put(b"hello\n"), (hash.clone(), true));
        assert_eq!(blobs.get(&hash).unwrap(), b"hello\n");
        assert_eq!(
            std::fs::read_dir(dir.path().join("blobs")).unwrap().count(),
            1
        );
        let big = vec![b'x'; MAX_BLOB_BYTES + 1];
        assert!(!blobs.put(&big).1);
        assert!(blobs.get("../../etc/passwd").is_err());
        let memory = Blobs::in_memory();
        let (hash, kept) = memory.put(b"x");
        assert!(kept);
        assert_eq!(memory.get(&hash).unwrap(), b"x");
    }
}
