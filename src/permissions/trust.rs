//! Which project rules files may allow anything. A project's
//! `.crucible/permissions.toml` lives in the workspace, where the model's
//! own tools can write (and where a cloned repository can bring one), so
//! the model could otherwise widen what it may do without asking. Its
//! allow rules apply only while the file holds what crucible-agent itself
//! last wrote there (an "always allow in this project" answer, a revoke)
//! or what the user trusted with `/permissions trust`. Its deny and ask
//! rules always apply: they only narrow. The record lives in the agent's
//! data directory, outside every workspace.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record's file name in the data directory.
pub const FILE_NAME: &str = "trusted-rules.json";

/// The trusted contents of project rules files, by the file's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedRules {
    record: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    version: u32,
    /// Path → SHA-256 of the content trusted.
    #[serde(default)]
    files: BTreeMap<PathBuf, String>,
}

impl TrustedRules {
    /// The record in `data_dir`.
    pub fn in_dir(data_dir: &Path) -> Self {
        Self {
            record: data_dir.join(FILE_NAME),
        }
    }

    /// Whether `content` is what was trusted for `file`.
    pub fn is_trusted(&self, file: &Path, content: &[u8]) -> bool {
        self.read()
            .files
            .get(file)
            .is_some_and(|hash| *hash == digest(content))
    }

    /// Trusts `file` as it is now (absent: forgets it).
    pub fn trust_current(&self, file: &Path) -> io::Result<()> {
        let content = match std::fs::read(file) {
            Ok(content) => Some(content),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(err),
        };
        let mut record = self.read();
        record.version = 1;
        match content {
            Some(content) => record.files.insert(file.to_path_buf(), digest(&content)),
            None => record.files.remove(file),
        };
        let text = serde_json::to_vec_pretty(&record).map_err(io::Error::other)?;
        if let Some(dir) = self.record.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // A temp file renamed over the record: a crash leaves the old one.
        let temp = self
            .record
            .with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&temp, text)?;
        std::fs::rename(&temp, &self.record)
    }

    /// The record; a missing or unreadable one trusts nothing.
    fn read(&self) -> Record {
        std::fs::read(&self.record)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }
}

fn digest(content: &[u8]) -> String {
    Sha256::digest(content)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_trusted_as_it_was_when_trusted_and_not_after_a_change() {
        let data = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let file = project.path().join("permissions.toml");
        let trusted = TrustedRules::in_dir(data.path());
        std::fs::write(&file, "a").unwrap();
        assert!(
            !trusted.is_trusted(&file, b"a"),
            "nothing is trusted at first"
        );
        trusted.trust_current(&file).unwrap();
        assert!(trusted.is_trusted(&file, b"a"));
        assert!(!trusted.is_trusted(&file, b"a, changed"));
        assert!(!trusted.is_trusted(&project.path().join("other.toml"), b"a"));

        std::fs::remove_file(&file).unwrap();
        trusted.trust_current(&file).unwrap();
        assert!(
            !trusted.is_trusted(&file, b"a"),
            "a removed file is forgotten"
        );
        std::fs::write(data.path().join(FILE_NAME), "not json").unwrap();
        assert!(!trusted.is_trusted(&file, b"a"));
    }
}
