//! What goes wrong loading a config file. Every error names the file; a bad
//! value also names the key and the fix.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::providers::settings::InvalidSetting;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML or has a wrong type:\n{message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: key `{key}`: {problem}. {fix}")]
    Invalid {
        path: PathBuf,
        key: String,
        problem: String,
        fix: String,
    },
    /// A command-line flag that asks for something the file lacks: the
    /// flag is what to change, not the file.
    #[error("{flag} {value}: {problem} in config file {path}. {fix}")]
    Flag {
        path: PathBuf,
        flag: &'static str,
        value: String,
        problem: String,
        fix: String,
    },
}

/// A bad value in the file at `path`.
pub(super) fn invalid(
    path: &Path,
    key: impl Into<String>,
    problem: impl Into<String>,
    fix: impl Into<String>,
) -> ConfigError {
    ConfigError::Invalid {
        path: path.to_path_buf(),
        key: key.into(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// A domain's verdict on one of its tables, placed in the file at `path`.
pub(super) fn in_file(path: &Path) -> impl Fn(InvalidSetting) -> ConfigError + '_ {
    |setting| invalid(path, setting.key, setting.problem, setting.fix)
}
