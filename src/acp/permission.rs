//! Permission questions' choices and the user's answer, which both ACP
//! versions write alike: written once in [`permission_wire!`] and expanded
//! for each version's schema module.

use thiserror::Error;

/// Why a client's answer to a permission request is not one the agent offered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NotOffered {
    #[error("it chose `{0}`, which was not offered")]
    Option(String),
    #[error("it answered with an outcome this agent does not know")]
    Outcome,
}

macro_rules! permission_wire {
    ($version:ident) => {
        pub mod $version {
            use agent_client_protocol_schema::$version as acp;

            use super::NotOffered;
            use crate::client::PermissionChoice;

            /// The choices every permission question offers.
            pub fn options() -> Vec<acp::PermissionOption> {
                PermissionChoice::OFFERED
                    .iter()
                    .map(|(choice, id, name)| {
                        let kind = match choice {
                            PermissionChoice::AllowOnce => acp::PermissionOptionKind::AllowOnce,
                            PermissionChoice::AllowAlways
                            | PermissionChoice::AllowInProject
                            | PermissionChoice::AllowEverywhere => {
                                acp::PermissionOptionKind::AllowAlways
                            }
                            PermissionChoice::RejectOnce | PermissionChoice::Cancelled => {
                                acp::PermissionOptionKind::RejectOnce
                            }
                            PermissionChoice::RejectAlways => {
                                acp::PermissionOptionKind::RejectAlways
                            }
                        };
                        acp::PermissionOption::new(*id, *name, kind)
                    })
                    .collect()
            }

            /// The user's answer; `Err` says why it is not one the agent offered.
            pub fn choice(
                response: acp::RequestPermissionResponse,
            ) -> Result<PermissionChoice, NotOffered> {
                match response.outcome {
                    acp::RequestPermissionOutcome::Cancelled { .. } => {
                        Ok(PermissionChoice::Cancelled)
                    }
                    acp::RequestPermissionOutcome::Selected(selected) => {
                        PermissionChoice::from_option_id(&selected.option_id.0)
                            .ok_or_else(|| NotOffered::Option(selected.option_id.0.to_string()))
                    }
                    _ => Err(NotOffered::Outcome),
                }
            }
        }
    };
}

permission_wire!(v1);
permission_wire!(v2);
