//! Signing in, as ACP has it: the one method this agent offers (a
//! terminal running `crucible-agent setup`, which the ACP registry asks
//! every agent for), `authenticate` with it, and the unstable `auth/status`.
//! Whether a sign-in is needed comes from the providers' settings
//! ([`credentials`]): no request is made.

use agent_client_protocol_schema::v1 as acp;

use crate::providers::Providers;
use crate::providers::settings::credentials::{self, Credential, SignIn};
use crate::transport::RpcError;
use crate::transport::jsonrpc::ErrorCode;

/// The id of the terminal method: the client runs this binary with `setup`.
pub const SETUP_METHOD: &str = "setup";

/// ACP's `auth_required` error code.
const AUTH_REQUIRED: ErrorCode = ErrorCode(-32000);

/// The terminal method's name and description, as clients show them.
pub const SETUP_NAME: &str = "Set up in a terminal";
pub const SETUP_DESCRIPTION: &str = "Finds local model servers, asks for a hosted provider's key where one is needed, and writes the config";

/// What `initialize` offers: a terminal running `crucible-agent setup`.
pub fn methods() -> Vec<acp::AuthMethod> {
    vec![acp::AuthMethod::Terminal(
        acp::AuthMethodTerminal::new(SETUP_METHOD, SETUP_NAME)
            .description(SETUP_DESCRIPTION.to_string())
            .args(vec!["setup".to_string()]),
    )]
}

/// The enabled providers' sign-in state.
pub fn state(providers: &Providers) -> SignIn {
    let all = providers.all();
    credentials::sign_in(
        all.iter()
            .filter_map(|(name, settings)| Some((name.as_str(), settings.as_deref()?))),
    )
}

/// `authenticate`: the terminal method is run by the client, not here, so
/// this only says whether it left the agent ready: no error when no key is
/// missing; `auth_required` naming the missing ones otherwise. An id this
/// agent did not offer is refused.
pub fn authenticate(method_id: &str, state: &SignIn) -> Result<(), RpcError> {
    if method_id != SETUP_METHOD {
        return Err(RpcError::invalid_params(format!(
            "field `methodId`: `{method_id}` is not a method this agent offers; use `{SETUP_METHOD}` (initialize lists it under authMethods)"
        )));
    }
    match state {
        SignIn::NotRequired | SignIn::Ready => Ok(()),
        SignIn::Missing(missing) => Err(RpcError::new(
            AUTH_REQUIRED,
            format!(
                "Authentication required: no API key for {}; run `crucible-agent setup` in a terminal (or set the variable), then restart the agent",
                describe_missing(missing)
            ),
        )),
    }
}

fn describe_missing(missing: &[(String, Option<String>)]) -> String {
    missing
        .iter()
        .map(|(name, variable)| match variable {
            Some(variable) => format!("provider `{name}` ({variable})"),
            None => format!("provider `{name}`"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sign-in state, as `auth/status` (unstable) tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    NotRequired,
    Authenticated,
    Unauthenticated,
}

/// A hosted provider as an account: where its key comes from, or which
/// one is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub description: String,
}

/// What `auth/status` answers, in either version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub state: State,
    pub accounts: Vec<Account>,
}

/// `auth/status` (unstable): the state, and each hosted provider as an
/// account saying where its key comes from or which one is missing.
pub fn status(providers: &Providers) -> Status {
    let state = match state(providers) {
        SignIn::NotRequired => State::NotRequired,
        SignIn::Ready => State::Authenticated,
        SignIn::Missing(_) => State::Unauthenticated,
    };
    let accounts = providers
        .all()
        .into_iter()
        .filter_map(|(name, settings)| {
            let description = match Credential::of(settings.as_deref()?) {
                Credential::Local | Credential::Keyless => return None,
                Credential::Key(source) => format!("API key from {source}"),
                Credential::Missing {
                    variable: Some(variable),
                } => format!("no API key: set {variable} or run `crucible-agent setup`"),
                Credential::Missing { variable: None } => {
                    "no API key: run `crucible-agent setup`".to_string()
                }
            };
            Some(Account { name, description })
        })
        .collect();
    Status { state, accounts }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_terminal_method_runs_setup_and_authenticate_says_whether_it_is_done() {
        let methods = serde_json::to_value(methods()).unwrap();
        assert_eq!(
            methods,
            json!([{"type": "terminal", "id": "setup", "name": "Set up in a terminal",
                "description": methods[0]["description"], "args": ["setup"]}])
        );
        assert!(authenticate("setup", &SignIn::NotRequired).is_ok());
        assert!(authenticate("setup", &SignIn::Ready).is_ok());
        let missing = SignIn::Missing(vec![("claude".into(), Some("ANTHROPIC_API_KEY".into()))]);
        let err = authenticate("setup", &missing).unwrap_err();
        assert_eq!(err.code, AUTH_REQUIRED);
        assert!(
            err.message.contains("`claude` (ANTHROPIC_API_KEY)"),
            "{}",
            err.message
        );
        let err = authenticate("oauth", &SignIn::Ready).unwrap_err();
        assert_eq!(
            err.code,
            crate::transport::jsonrpc::ErrorCode::INVALID_PARAMS
        );
        assert!(err.message.contains("`setup`"), "{}", err.message);
    }
}
