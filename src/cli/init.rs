//! `config init` and `config path`.

use std::io::Write;
use std::path::Path;

use super::CliError;

/// The commented sample config, as shipped beside the source.
pub const SAMPLE_CONFIG: &str = include_str!("../../config.sample.toml");

/// What `config init` does with a config file that is there already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Keep,
    /// `--force`.
    Replace,
}

/// Write the sample config to `path`, creating its directory. An existing
/// file is kept unless `existing` says to replace it.
pub fn init(path: &Path, existing: Existing, out: &mut dyn Write) -> Result<(), CliError> {
    if path.exists() && existing == Existing::Keep {
        return Err(CliError::Refused(format!(
            "{} already exists; keeping it. Use `crucible-agent config init --force` to replace it",
            path.display()
        )));
    }
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|err| CliError::Refused(format!("cannot create {}: {err}", dir.display())))?;
    }
    std::fs::write(path, SAMPLE_CONFIG)
        .map_err(|err| CliError::Refused(format!("cannot write {}: {err}", path.display())))?;
    writeln!(out, "wrote {}", path.display())?;
    writeln!(
        out,
        "edit [llm.providers.local] (endpoint, default_model), then run `crucible-agent doctor`"
    )?;
    Ok(())
}

pub fn paths(config: &Path, data_dir: &Path, out: &mut dyn Write) -> Result<(), CliError> {
    let state = |path: &Path| {
        if path.exists() {
            ""
        } else {
            " (not created yet)"
        }
    };
    writeln!(out, "config:   {}{}", config.display(), state(config))?;
    writeln!(out, "data:     {}{}", data_dir.display(), state(data_dir))?;
    let sessions = data_dir.join("sessions");
    writeln!(out, "sessions: {}{}", sessions.display(), state(&sessions))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Overrides};

    #[test]
    fn init_writes_the_sample_once_and_it_loads() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("a/b/config.toml");
        let mut out = Vec::new();
        init(&path, Existing::Keep, &mut out).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), SAMPLE_CONFIG);
        Config::load(&path, crate::config::ChosenBy::User, &Overrides::default()).unwrap();
        std::fs::write(&path, "# mine").unwrap();
        let err = init(&path, Existing::Keep, &mut out)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--force"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine");
        init(&path, Existing::Replace, &mut out).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), SAMPLE_CONFIG);
    }
}
