//! `[shell_environment]`: how a command's environment is built from the
//! agent's (the policy is the tools domain's [`EnvironmentPolicy`]); and
//! `[sensitive_files]`, the files whose reads ask first.

use std::path::Path;

use super::error::{ConfigError, invalid};
use super::raw::{RawSensitiveFiles, RawShellEnvironment};
use crate::tools::environment::{EnvironmentPolicy, Inherit};
use crate::tools::sensitive::SensitiveFiles;

/// The default list, plus `add`, less `remove`.
pub(super) fn sensitive_files(
    raw: RawSensitiveFiles,
    path: &Path,
) -> Result<SensitiveFiles, ConfigError> {
    let mut files = SensitiveFiles::default();
    let remove = raw.remove.unwrap_or_default();
    for (index, pattern) in remove.iter().enumerate() {
        if !files.patterns.contains(pattern) {
            return Err(invalid(
                path,
                format!("sensitive_files.remove[{index}]"),
                format!("`{pattern}` is not in the default list"),
                format!(
                    "Name one of the defaults exactly: {}.",
                    files.patterns.join(", ")
                ),
            ));
        }
    }
    files.patterns.retain(|pattern| !remove.contains(pattern));
    for (index, pattern) in raw.add.unwrap_or_default().into_iter().enumerate() {
        if pattern.trim().is_empty() {
            return Err(invalid(
                path,
                format!("sensitive_files.add[{index}]"),
                "is empty",
                "Give a file name or glob such as \"*.secret\", or a path end such as \".kube/config\".",
            ));
        }
        files.patterns.push(pattern);
    }
    Ok(files)
}

pub(super) fn validate(
    raw: RawShellEnvironment,
    path: &Path,
) -> Result<EnvironmentPolicy, ConfigError> {
    let key = |field: &str| format!("shell_environment.{field}");
    let inherit = match raw.inherit.as_deref() {
        None | Some("all") => Inherit::All,
        Some("core") => Inherit::Core,
        Some("none") => Inherit::None,
        Some(other) => {
            return Err(invalid(
                path,
                key("inherit"),
                format!("`{other}` is not a choice"),
                "Use \"all\" (the default), \"core\" (PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, TMPDIR) or \"none\".",
            ));
        }
    };
    let globs = |field: &str, values: Option<Vec<String>>| {
        let values = values.unwrap_or_default();
        match values.iter().position(|glob| glob.trim().is_empty()) {
            Some(index) => Err(invalid(
                path,
                format!("{}[{index}]", key(field)),
                "is empty",
                "Give a variable name or a glob such as \"AWS_*\", or remove the entry.",
            )),
            None => Ok(values),
        }
    };
    let exclude = globs("exclude", raw.exclude)?;
    let include_only = globs("include_only", raw.include_only)?;
    let mut set = Vec::new();
    for (name, value) in raw.set.unwrap_or_default() {
        if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
            return Err(invalid(
                path,
                key(&format!("set.{name}")),
                "cannot be set in an environment",
                "Use a name without `=`, and a name and value without NUL characters.",
            ));
        }
        set.push((name, value));
    }
    Ok(EnvironmentPolicy {
        inherit,
        ignore_default_excludes: raw.ignore_default_excludes.unwrap_or(false),
        exclude,
        include_only,
        set,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};
    use crate::tools::environment::{EnvironmentPolicy, Inherit};

    #[test]
    fn the_policy_is_read_and_checked() {
        assert_eq!(
            load("", &[]).unwrap().shell_environment,
            EnvironmentPolicy::default()
        );
        let text = "[shell_environment]\ninherit = \"core\"\nignore_default_excludes = true\nexclude = [\"AWS_*\"]\ninclude_only = [\"PATH\", \"HOME\"]\nset = { CI = \"1\" }";
        let policy = load(text, &[]).unwrap().shell_environment;
        assert_eq!(policy.inherit, Inherit::Core);
        assert!(policy.ignore_default_excludes);
        assert_eq!(policy.exclude, ["AWS_*"]);
        assert_eq!(policy.include_only, ["PATH", "HOME"]);
        assert_eq!(policy.set, [("CI".to_string(), "1".to_string())]);
        let err = refusal("[shell_environment]\ninherit = \"some\"");
        assert!(err.contains("shell_environment.inherit"), "{err}");
        assert!(err.contains("\"core\""), "{err}");
        let err = refusal("[shell_environment]\nexclude = [\"\"]");
        assert!(err.contains("shell_environment.exclude[0]"), "{err}");
        let err = refusal("[shell_environment]\nset = { \"A=B\" = \"x\" }");
        assert!(err.contains("shell_environment.set.A=B"), "{err}");
        let err = refusal("[shell_environment]\ninhrit = \"all\"");
        assert!(err.contains("inhrit"), "{err}");
    }

    #[test]
    fn sensitive_files_add_to_and_remove_from_the_defaults() {
        let text = "[sensitive_files]\nadd = [\".kube/config\"]\nremove = [\".npmrc\"]";
        let files = load(text, &[]).unwrap().sensitive_files;
        assert!(files.patterns.contains(&".kube/config".to_string()));
        assert!(!files.patterns.contains(&".npmrc".to_string()));
        assert!(files.patterns.contains(&".env".to_string()));
        let err = refusal("[sensitive_files]\nremove = [\"*.txt\"]");
        assert!(err.contains("sensitive_files.remove[0]"), "{err}");
    }
}
