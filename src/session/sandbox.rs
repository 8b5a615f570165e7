//! The session's `sandbox` option: how the commands it runs are confined
//! (`[sandbox] mode` is where it starts; it is not saved with the session).

use super::SessionActor;
use super::settings::{Notify, SettingError};

use crate::client::{OptionCategory, OptionValue, SANDBOX_OPTION, SelectOption, Update};
use crate::tools::sandbox::SandboxMode;

impl SessionActor {
    /// The selector for the sandbox mode.
    pub(super) fn sandbox_option(&self) -> SelectOption {
        let sandbox = &self.services.tool_context.sandbox;
        let description = match sandbox.support() {
            crate::tools::sandbox::Support::Available { .. } => {
                "How commands the agent runs are confined".to_string()
            }
            crate::tools::sandbox::Support::Unavailable(reason) => {
                format!("How commands the agent runs are confined (unavailable here: {reason})")
            }
        };
        SelectOption {
            id: SANDBOX_OPTION.into(),
            name: "Sandbox".into(),
            description,
            category: OptionCategory::Sandbox,
            current: sandbox.mode().as_str().into(),
            values: SandboxMode::ALL
                .into_iter()
                .map(|mode| OptionValue {
                    id: mode.as_str().into(),
                    name: mode.as_str().into(),
                    description: Some(mode.description().into()),
                })
                .collect(),
        }
    }

    /// A new sandbox mode, from the next command on.
    pub(super) fn switch_sandbox(
        &mut self,
        mode: &str,
        notify: Notify,
    ) -> Result<String, SettingError> {
        let sandbox = &self.services.tool_context.sandbox;
        let Some(mode) = SandboxMode::parse(mode) else {
            return Err(SettingError::Sandbox {
                asked: mode.to_string(),
                kept: sandbox.mode().as_str().to_string(),
            });
        };
        if sandbox.mode() != mode {
            sandbox.set_mode(mode);
            if notify == Notify::Client {
                self.send(Update::ConfigOptions(self.options()));
            }
        }
        Ok(format!("sandbox is now `{}`.", mode.as_str()))
    }
}
