//! The client port spoken as ACP: session updates become `session/update`
//! notifications; permissions, files and terminals become requests to the
//! client (`session/request_permission`, `fs/*`, `terminal/*`), and the
//! client's answers and errors come back in the agent's own terms.

use std::path::Path;

use agent_client_protocol_schema::v1::{self as acp, CLIENT_METHOD_NAMES as METHODS};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::translate;
use crate::client::{
    Answer, ClientError, ClientFuture, ClientSink, CreateTerminal, PermissionChoice, Question,
    ReadTextFile, TerminalExit, TerminalId, TerminalOutput, Update, WriteTextFile,
};
use crate::events::ToolCallInfo;
use crate::model::SessionId;
use crate::providers::lenient::Lenient;
use crate::transport::jsonrpc::ErrorCode;
use crate::transport::{Connection, RequestError};

impl ClientSink for Connection {
    fn send(&self, session_id: &SessionId, update: Update) {
        for update in translate::session_updates(&update) {
            let notification = acp::SessionNotification::new(session_id.to_string(), update);
            self.notify(METHODS.session_update, &notification);
        }
    }

    fn room(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(Connection::room(self))
    }

    fn ask_user(&self, question: Question) -> ClientFuture<'_, Answer> {
        let request = translate::elicitation(&question);
        Box::pin(async move {
            let response: acp::CreateElicitationResponse =
                ask(self, METHODS.elicitation_create, &request).await?;
            Ok(translate::answer(response))
        })
    }

    fn request_permission(
        &self,
        session_id: &SessionId,
        call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        let request = translate::permission_request(session_id, call);
        Box::pin(async move {
            let response = ask(self, METHODS.session_request_permission, &request).await?;
            translate::permission_choice(response)
                .map_err(|err| ClientError::Failed(err.to_string()))
        })
    }

    fn read_text_file(&self, request: ReadTextFile) -> ClientFuture<'_, String> {
        let request =
            acp::ReadTextFileRequest::new(acp::SessionId::new(request.session_id), request.path)
                .line(request.line)
                .limit(request.limit);
        Box::pin(async move {
            let response: acp::ReadTextFileResponse =
                ask(self, METHODS.fs_read_text_file, &request).await?;
            Ok(response.content)
        })
    }

    fn write_text_file(&self, request: WriteTextFile) -> ClientFuture<'_, ()> {
        let request = acp::WriteTextFileRequest::new(
            acp::SessionId::new(request.session_id),
            request.path,
            request.content,
        );
        // Clients answer `{}` or `null`; either means written.
        Box::pin(async move {
            send_request(self, METHODS.fs_write_text_file, &request)
                .await
                .map(drop)
        })
    }

    fn create_terminal(&self, request: CreateTerminal) -> ClientFuture<'_, TerminalId> {
        Box::pin(async move {
            let params = CreateTerminalParams::of(&request);
            let response: acp::CreateTerminalResponse =
                ask(self, METHODS.terminal_create, &params).await?;
            Ok(TerminalId {
                session_id: request.session_id,
                terminal_id: response.terminal_id.0.to_string(),
            })
        })
    }

    fn terminal_output(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalOutput> {
        let request = acp::TerminalOutputRequest::new(
            acp::SessionId::new(terminal.session_id.clone()),
            terminal.terminal_id.clone(),
        );
        Box::pin(async move {
            let answer = send_request(self, METHODS.terminal_output, &request).await?;
            Ok(TerminalOutputAnswer::read(answer))
        })
    }

    fn wait_for_terminal_exit(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalExit> {
        let request = acp::WaitForTerminalExitRequest::new(
            acp::SessionId::new(terminal.session_id.clone()),
            terminal.terminal_id.clone(),
        );
        Box::pin(async move {
            let response: acp::WaitForTerminalExitResponse =
                ask(self, METHODS.terminal_wait_for_exit, &request).await?;
            Ok(terminal_exit(response.exit_status))
        })
    }

    fn kill_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        let request = acp::KillTerminalRequest::new(
            acp::SessionId::new(terminal.session_id.clone()),
            terminal.terminal_id.clone(),
        );
        Box::pin(async move {
            send_request(self, METHODS.terminal_kill, &request)
                .await
                .map(drop)
        })
    }

    fn release_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        let request = acp::ReleaseTerminalRequest::new(
            acp::SessionId::new(terminal.session_id.clone()),
            terminal.terminal_id.clone(),
        );
        Box::pin(async move {
            send_request(self, METHODS.terminal_release, &request)
                .await
                .map(drop)
        })
    }
}

/// Send a request and read its answer as `T`.
async fn ask<T: DeserializeOwned>(
    connection: &Connection,
    method: &str,
    params: &impl Serialize,
) -> Result<T, ClientError> {
    let answer = send_request(connection, method, params).await?;
    serde_json::from_value(answer).map_err(|err| {
        ClientError::Failed(format!("its answer to {method} could not be read: {err}"))
    })
}

async fn send_request(
    connection: &Connection,
    method: &str,
    params: &impl Serialize,
) -> Result<Value, ClientError> {
    connection
        .request(method, params)
        .await
        .map_err(client_error)
}

fn client_error(err: RequestError) -> ClientError {
    match err {
        RequestError::Rejected(err) if means_not_found(err.code, &err.message) => {
            ClientError::NotFound(err.message)
        }
        RequestError::Rejected(err) => ClientError::Failed(err.message),
        RequestError::Closed(_) => ClientError::Disconnected,
        err @ RequestError::Encode { .. } => ClientError::Failed(err.to_string()),
    }
}

/// Editors say "not found" in their own words, not always with the code.
fn means_not_found(code: ErrorCode, message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    code == ErrorCode::RESOURCE_NOT_FOUND
        || lower.contains("not found")
        || lower.contains("no such file")
}

/// `terminal/create` as clients have always received it: schema 1.20's
/// `acp::CreateTerminalRequest` leaves out empty `args` and `env` and an
/// absent `cwd` or `outputByteLimit`, where this writes `[]` and `null`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CreateTerminalParams<'a> {
    session_id: &'a str,
    command: &'a str,
    args: &'a [String],
    env: Vec<acp::EnvVariable>,
    cwd: Option<&'a Path>,
    output_byte_limit: Option<u64>,
}

impl<'a> CreateTerminalParams<'a> {
    fn of(request: &'a CreateTerminal) -> Self {
        Self {
            session_id: request.session_id.as_str(),
            command: &request.command,
            args: &request.args,
            env: request
                .env
                .iter()
                .map(|(name, value)| acp::EnvVariable::new(name, value))
                .collect(),
            cwd: request.cwd.as_deref(),
            output_byte_limit: request.output_byte_limit,
        }
    }
}

/// `terminal/output`'s answer (`acp::TerminalOutputResponse`) read
/// leniently: whatever the editor printed is better than an error, so a
/// field missing or of another type reads as nothing.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct TerminalOutputAnswer {
    output: Lenient<String>,
    truncated: Lenient<bool>,
    exit_status: Lenient<acp::TerminalExitStatus>,
}

impl TerminalOutputAnswer {
    fn read(answer: Value) -> TerminalOutput {
        // Only an object: serde would also read an array as the fields in order.
        let answer = match answer {
            Value::Object(fields) => Self::deserialize(fields).unwrap_or_default(),
            _ => Self::default(),
        };
        TerminalOutput {
            output: answer.output.into_option().unwrap_or_default(),
            truncated: answer.truncated.into_option() == Some(true),
            exit: answer.exit_status.into_option().map(terminal_exit),
        }
    }
}

fn terminal_exit(status: acp::TerminalExitStatus) -> TerminalExit {
    TerminalExit {
        exit_code: status.exit_code,
        signal: status.signal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ToolKind;
    use crate::transport::RpcError;
    use serde_json::json;
    use std::future::Future;
    use std::path::PathBuf;

    /// Runs one port call against a client that answers `answer`; gives
    /// back the line the agent sent and what the call returned.
    async fn exchange<T: Send + 'static>(
        call: impl FnOnce(Connection) -> BoxedCall<T>,
        answer: Result<Value, RpcError>,
    ) -> (String, Result<T, ClientError>) {
        let (connection, mut lines) = Connection::new();
        let running = tokio::spawn(call(connection.clone()));
        let line = lines.recv().await.unwrap();
        let sent: Value = serde_json::from_slice(&line).unwrap();
        let id = serde_json::from_value(sent["id"].clone()).unwrap();
        connection.resolve(&id, answer);
        (String::from_utf8(line).unwrap(), running.await.unwrap())
    }

    type BoxedCall<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, ClientError>> + Send>>;

    fn read(path: &str, line: Option<u32>) -> ReadTextFile {
        ReadTextFile {
            session_id: "s".into(),
            path: PathBuf::from(path),
            line,
            limit: None,
        }
    }

    fn terminal() -> TerminalId {
        TerminalId {
            session_id: "s".into(),
            terminal_id: "t1".into(),
        }
    }

    fn create_terminal() -> CreateTerminal {
        CreateTerminal {
            session_id: "s".into(),
            command: "sh".into(),
            args: vec!["-c".into(), "make test".into()],
            env: Vec::new(),
            cwd: Some(PathBuf::from("/work")),
            output_byte_limit: Some(30_000),
        }
    }

    #[tokio::test]
    async fn file_requests_are_acp_fs_requests() {
        let (line, read) = exchange(
            |c| Box::pin(async move { c.read_text_file(read("/a.rs", Some(3))).await }),
            Ok(json!({"content": "fn main() {}"})),
        )
        .await;
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/a.rs","line":3}}"#
        );
        assert_eq!(read.unwrap(), "fn main() {}");
        let (line, written) = exchange(
            |c| {
                Box::pin(async move {
                    c.write_text_file(WriteTextFile {
                        session_id: "s".into(),
                        path: PathBuf::from("/a.rs"),
                        content: "x".into(),
                    })
                    .await
                })
            },
            Ok(Value::Null),
        )
        .await;
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":0,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/a.rs","content":"x"}}"#
        );
        assert_eq!(written, Ok(()));
    }

    #[tokio::test]
    async fn terminal_requests_are_acp_terminal_requests() {
        let (line, created) = exchange(
            |c| Box::pin(async move { c.create_terminal(create_terminal()).await }),
            Ok(json!({"terminalId": "t1"})),
        )
        .await;
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":0,"method":"terminal/create","params":{"sessionId":"s","command":"sh","args":["-c","make test"],"env":[],"cwd":"/work","outputByteLimit":30000}}"#
        );
        assert_eq!(created.unwrap(), terminal());

        let (line, exit) = exchange(
            |c| Box::pin(async move { c.wait_for_terminal_exit(&terminal()).await }),
            Ok(json!({"exitCode": null, "signal": "SIGKILL"})),
        )
        .await;
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":0,"method":"terminal/wait_for_exit","params":{"sessionId":"s","terminalId":"t1"}}"#
        );
        assert_eq!(
            exit.unwrap(),
            TerminalExit {
                exit_code: None,
                signal: Some("SIGKILL".into())
            }
        );

        let (_, output) = exchange(
            |c| Box::pin(async move { c.terminal_output(&terminal()).await }),
            Ok(json!({"output": "ok\n", "truncated": true, "exitStatus": {"exitCode": 0}})),
        )
        .await;
        assert_eq!(
            output.unwrap(),
            TerminalOutput {
                output: "ok\n".into(),
                truncated: true,
                exit: Some(TerminalExit {
                    exit_code: Some(0),
                    signal: None
                }),
            }
        );
        // An answer missing its fields still gives what it has.
        let (_, output) = exchange(
            |c| Box::pin(async move { c.terminal_output(&terminal()).await }),
            Ok(json!({})),
        )
        .await;
        assert_eq!(output.unwrap(), TerminalOutput::default());

        for (method, line) in [
            (
                "terminal/kill",
                r#"{"jsonrpc":"2.0","id":0,"method":"terminal/kill","params":{"sessionId":"s","terminalId":"t1"}}"#,
            ),
            (
                "terminal/release",
                r#"{"jsonrpc":"2.0","id":0,"method":"terminal/release","params":{"sessionId":"s","terminalId":"t1"}}"#,
            ),
        ] {
            let (sent, result) = exchange(
                move |c| {
                    Box::pin(async move {
                        if method == "terminal/kill" {
                            c.kill_terminal(&terminal()).await
                        } else {
                            c.release_terminal(&terminal()).await
                        }
                    })
                },
                Ok(json!({})),
            )
            .await;
            assert_eq!(sent, line);
            assert_eq!(result, Ok(()));
        }
    }

    /// The request we write is one the schema reads as the same request,
    /// with `env` (and `args`) on the wire even when empty.
    #[test]
    fn terminal_create_params_are_the_schemas_request() {
        let with_env = CreateTerminal {
            env: vec![("RUST_LOG".into(), "debug".into())],
            ..create_terminal()
        };
        let bare = CreateTerminal {
            args: Vec::new(),
            cwd: None,
            output_byte_limit: None,
            ..create_terminal()
        };
        let table = [
            (
                with_env,
                acp::CreateTerminalRequest::new("s", "sh")
                    .args(vec!["-c".into(), "make test".into()])
                    .env(vec![acp::EnvVariable::new("RUST_LOG", "debug")])
                    .cwd(PathBuf::from("/work"))
                    .output_byte_limit(30_000),
                r#"{"sessionId":"s","command":"sh","args":["-c","make test"],"env":[{"name":"RUST_LOG","value":"debug"}],"cwd":"/work","outputByteLimit":30000}"#,
            ),
            (
                bare,
                acp::CreateTerminalRequest::new("s", "sh"),
                r#"{"sessionId":"s","command":"sh","args":[],"env":[],"cwd":null,"outputByteLimit":null}"#,
            ),
        ];
        for (request, schema, wire) in table {
            let written = serde_json::to_string(&CreateTerminalParams::of(&request)).unwrap();
            assert_eq!(written, wire);
            let read: acp::CreateTerminalRequest = serde_json::from_str(&written).unwrap();
            assert_eq!(read, schema, "{wire}");
        }
    }

    /// The schema's own answers read as they say; anything else gives
    /// what it has rather than an error.
    #[test]
    fn terminal_output_answers_are_read_leniently() {
        let exited = |code: u32| {
            Some(TerminalExit {
                exit_code: Some(code),
                signal: None,
            })
        };
        let table = [
            (
                serde_json::to_value(
                    acp::TerminalOutputResponse::new("ok\n", true)
                        .exit_status(acp::TerminalExitStatus::new().exit_code(2)),
                )
                .unwrap(),
                TerminalOutput {
                    output: "ok\n".into(),
                    truncated: true,
                    exit: exited(2),
                },
            ),
            (
                serde_json::to_value(acp::TerminalOutputResponse::new("running", false)).unwrap(),
                TerminalOutput {
                    output: "running".into(),
                    truncated: false,
                    exit: None,
                },
            ),
            (
                json!({"output": 5, "truncated": "yes", "exitStatus": {"exitCode": 0}}),
                TerminalOutput {
                    output: String::new(),
                    truncated: false,
                    exit: exited(0),
                },
            ),
            (
                json!({"output": "half", "exitStatus": "done"}),
                TerminalOutput {
                    output: "half".into(),
                    ..TerminalOutput::default()
                },
            ),
            (json!(null), TerminalOutput::default()),
            (json!(["not", "an", "answer"]), TerminalOutput::default()),
        ];
        for (answer, expected) in table {
            assert_eq!(
                TerminalOutputAnswer::read(answer.clone()),
                expected,
                "{answer}"
            );
        }
    }

    #[tokio::test]
    async fn client_errors_become_port_errors() {
        let table = [
            (
                Err(RpcError::new(ErrorCode::RESOURCE_NOT_FOUND, "gone")),
                ClientError::NotFound("gone".into()),
            ),
            (
                Err(RpcError::new(
                    ErrorCode::INTERNAL_ERROR,
                    "ENOENT: no such file or directory",
                )),
                ClientError::NotFound("ENOENT: no such file or directory".into()),
            ),
            (
                Err(RpcError::new(
                    ErrorCode::INTERNAL_ERROR,
                    "permission denied",
                )),
                ClientError::Failed("permission denied".into()),
            ),
            (
                Ok(json!({"text": "no content field"})),
                ClientError::Failed(
                    "its answer to fs/read_text_file could not be read: missing field `content`"
                        .into(),
                ),
            ),
        ];
        for (answer, expected) in table {
            let (_, read) = exchange(
                |c| Box::pin(async move { c.read_text_file(read("/a", None)).await }),
                answer,
            )
            .await;
            assert_eq!(read, Err(expected));
        }
        let (connection, _lines) = Connection::new();
        let asking = {
            let connection = connection.clone();
            tokio::spawn(async move { connection.kill_terminal(&terminal()).await })
        };
        while !asking.is_finished() {
            connection.fail_pending();
            tokio::task::yield_now().await;
        }
        assert_eq!(asking.await.unwrap(), Err(ClientError::Disconnected));
    }

    #[tokio::test]
    async fn permission_questions_offer_the_four_choices_and_read_the_answer() {
        let call = ToolCallInfo {
            id: "c1".into(),
            name: "shell".into(),
            title: "Run ls".into(),
            kind: ToolKind::Execute,
            locations: Vec::new(),
            raw_input: json!({"command": "ls"}),
        };
        let table = [
            (
                json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}}),
                Ok(PermissionChoice::AllowAlways),
            ),
            (
                json!({"outcome": {"outcome": "cancelled"}}),
                Ok(PermissionChoice::Cancelled),
            ),
            (
                json!({"outcome": {"outcome": "selected", "optionId": "maybe"}}),
                Err(ClientError::Failed(
                    "it chose `maybe`, which was not offered".into(),
                )),
            ),
        ];
        for (answer, expected) in table {
            let call = call.clone();
            let (line, choice) = exchange(
                move |c| Box::pin(async move { c.request_permission(&"s".into(), &call).await }),
                Ok(answer),
            )
            .await;
            let sent: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(sent["method"], "session/request_permission");
            assert_eq!(sent["params"]["toolCall"]["toolCallId"], "c1");
            let offered: Vec<&str> = sent["params"]["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|option| option["optionId"].as_str().unwrap())
                .collect();
            assert_eq!(
                offered,
                [
                    "allow_once",
                    "allow_always",
                    "allow_project",
                    "allow_everywhere",
                    "reject_once",
                    "reject_always"
                ]
            );
            assert_eq!(choice, expected);
        }
    }
}
