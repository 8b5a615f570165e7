//! Files that usually hold secrets (`.env`, keys, credentials): reading one
//! asks first in every mode but `auto` (see `crate::permissions`).

use std::path::Path;

use crate::util::glob_matches;

/// Globs (`*` = any characters): one without `/` matches a file's name,
/// one with `/` the end of its path.
pub const DEFAULT_SENSITIVE_FILES: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".aws/credentials",
    ".aws/config",
    ".config/gcloud/*credentials*",
    ".config/gcloud/credentials.db",
    ".docker/config.json",
];

/// `[sensitive_files]`: the default list, with `add`ed patterns and
/// without `remove`d ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensitiveFiles {
    pub patterns: Vec<String>,
}

impl Default for SensitiveFiles {
    fn default() -> Self {
        Self {
            patterns: DEFAULT_SENSITIVE_FILES
                .iter()
                .map(|p| p.to_string())
                .collect(),
        }
    }
}

impl SensitiveFiles {
    /// Why `path` is sensitive, if it is: the pattern it matches.
    pub fn matching(&self, path: &Path) -> Option<&str> {
        let name = path.file_name()?.to_string_lossy();
        let whole = path.to_string_lossy();
        self.patterns
            .iter()
            .find(|pattern| {
                if pattern.contains('/') {
                    glob_matches(&format!("*/{pattern}"), &whole) || glob_matches(pattern, &whole)
                } else {
                    glob_matches(pattern, &name)
                }
            })
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_files_are_known_by_name_or_by_their_place() {
        let files = SensitiveFiles::default();
        for path in [
            "/p/.env",
            "/p/.env.local",
            "/p/certs/server.pem",
            "/home/u/.ssh/id_ed25519.pub",
            "/home/u/.aws/credentials",
            "/home/u/.config/gcloud/application_default_credentials.json",
            "/home/u/.docker/config.json",
        ] {
            assert!(files.matching(Path::new(path)).is_some(), "{path}");
        }
        for path in [
            "/p/src/env.rs",
            "/p/.envrc.md",
            "/p/config.json",
            "/p/keys.rs",
        ] {
            assert_eq!(files.matching(Path::new(path)), None, "{path}");
        }
    }
}
