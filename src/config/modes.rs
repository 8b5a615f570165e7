//! `[modes.ID]`: modes besides the built-in plan, act and auto.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{ConfigError, invalid};
use super::raw::RawMode;
use crate::modes::{Mode, ModeError, ModePolicy, ModeRegistry};

/// The built-in modes and those of the file.
pub(super) fn validate_modes(
    raw: BTreeMap<String, RawMode>,
    path: &Path,
) -> Result<ModeRegistry, ConfigError> {
    let mut modes = Vec::new();
    for (id, mode) in raw {
        let key = |field: &str| format!("modes.{id}.{field}");
        let policy = match mode.policy.as_deref() {
            Some(text) => ModePolicy::parse(text).ok_or_else(|| {
                invalid(
                    path,
                    key("policy"),
                    format!("`{text}` is not a mode policy"),
                    "Use \"read_only\" (nothing changed or run), \"ask\" (ask before changes) or \"auto\" (no questions).",
                )
            })?,
            None => {
                return Err(invalid(
                    path,
                    key("policy"),
                    "is missing",
                    "Say what the mode allows: policy = \"read_only\", \"ask\" or \"auto\".",
                ));
            }
        };
        let name = match mode.name {
            Some(name) if name.trim().is_empty() => {
                return Err(invalid(
                    path,
                    key("name"),
                    "is empty",
                    "Give the name the editor shows, or leave it out to use the id.",
                ));
            }
            Some(name) => name,
            None => id.clone(),
        };
        let description = mode.description.unwrap_or_else(|| {
            format!("Tools run as in the built-in `{}` policy", policy.as_str())
        });
        modes.push(Mode::new(id, name, description, policy));
    }
    ModeRegistry::with_modes(modes).map_err(|err| {
        let (id, fix) = match &err {
            ModeError::Builtin(id) => (
                id.clone(),
                "Pick another id; plan, act and auto are built in.",
            ),
            ModeError::Duplicate(id) => (id.clone(), "Define each mode once."),
            ModeError::BadId(id) => (id.clone(), "Rename the table, e.g. [modes.review]."),
        };
        invalid(path, format!("modes.{id}"), err.to_string(), fix)
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};

    #[test]
    fn config_modes_join_the_builtins_and_can_be_the_default() {
        let text = "[agent]\ndefault_mode = \"review\"\n[modes.review]\nname = \"Review\"\ndescription = \"Look, do not touch\"\npolicy = \"read_only\"\n[modes.yolo]\npolicy = \"auto\"";
        let config = load(text, &[]).unwrap();
        assert_eq!(config.default_mode, "review");
        assert_eq!(config.modes.ids(), "plan, act, auto, review, yolo");
        let review = config.modes.find("review").unwrap();
        assert_eq!(review.name, "Review");
        assert_eq!(review.policy, crate::modes::ModePolicy::ReadOnly);
        assert_eq!(config.modes.find("yolo").unwrap().name, "yolo");
        for (text, key) in [
            ("[modes.r]\nname = \"R\"", "modes.r.policy"),
            ("[modes.r]\npolicy = \"sometimes\"", "modes.r.policy"),
            ("[modes.plan]\npolicy = \"auto\"", "modes.plan"),
            ("[modes.\"Big Mode\"]\npolicy = \"auto\"", "modes.Big Mode"),
            ("[agent]\ndefault_mode = \"review\"", "agent.default_mode"),
        ] {
            let err = refusal(text);
            assert!(err.contains(&format!("key `{key}`")), "{err}");
            assert!(err.contains("/cfg/config.toml"), "{err}");
        }
        // Unknown keys are named by the parser.
        let err = refusal("[modes.r]\npolicy = \"ask\"\ncolour = \"red\"");
        assert!(err.contains("colour"), "{err}");
    }
}
