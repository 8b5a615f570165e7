//! `crucible-agent serve` as remote clients meet it: the binary started on
//! a free loopback port (its address read from what it prints on stderr),
//! and a Streamable HTTP client (reqwest, SSE read with eventsource-stream)
//! that speaks JSON-RPC through `POST /acp` and the GET streams.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use super::harness::{PATIENCE, agent_binary};

pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `serve`.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT/acp`.
    pub url: String,
    pub dir: tempfile::TempDir,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// `serve` with `config`, the token [`TOKEN`], sessions in a fresh
    /// `work` directory (the root), on a free port.
    pub async fn start(config: &str) -> Self {
        Self::start_with(config, &[], &[("CRUCIBLE_AGENT_TOKEN", TOKEN)]).await
    }

    pub async fn start_with(config: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("config.toml");
        std::fs::write(&config_path, config).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let mut command = Command::new(agent_binary());
        command
            .arg("--config")
            .arg(&config_path)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(args)
            .current_dir(dir.path().join("work"))
            .env_remove("CRUCIBLE_AGENT_TOKEN")
            .env_remove("OPENAI_API_KEY")
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the agent binary starts");
        let stderr_pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, address) = oneshot::channel();
        {
            let stderr = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut found = Some(found);
                let mut lines = BufReader::new(stderr_pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(at) = line.find("listening on ")
                        && let Some(sender) = found.take()
                    {
                        let url = line[at + "listening on ".len()..]
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_string();
                        let _ = sender.send(url);
                    }
                    let mut text = stderr.lock().unwrap();
                    text.push_str(&line);
                    text.push('\n');
                }
            });
        }
        let Ok(Ok(url)) = tokio::time::timeout(*PATIENCE, address).await else {
            panic!(
                "serve did not say where it listens; stderr:\n{}",
                stderr.lock().unwrap()
            )
        };
        Self {
            child,
            url,
            dir,
            stderr,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The root sessions may work in.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `ws://…/acp`.
    pub fn ws_url(&self) -> String {
        self.url.replacen("http://", "ws://", 1)
    }
}

/// `session/prompt`'s params: one text part.
pub fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// A raw POST of `body` with the token and these extra headers.
pub async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// One SSE stream's messages, as they come.
pub struct Stream {
    messages: mpsc::UnboundedReceiver<Value>,
}

impl Stream {
    /// Open the connection's stream, or a session's.
    pub async fn open(url: &str, connection: &str, session: Option<&str>) -> Self {
        let mut request = reqwest::Client::new()
            .get(url)
            .bearer_auth(TOKEN)
            .header("accept", "text/event-stream")
            .header("acp-connection-id", connection);
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
        let (tx, messages) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut events = eventsource_stream::EventStream::new(response.bytes_stream());
            while let Some(Ok(event)) = events.next().await {
                let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                if tx.send(message).is_err() {
                    return;
                }
            }
        });
        Self { messages }
    }

    /// The next message (a hang guard, not a speed check).
    pub async fn next(&mut self) -> Value {
        match tokio::time::timeout(*PATIENCE, self.messages.recv()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the stream ended"),
            Err(_) => panic!("no message on the stream in {:?}", *PATIENCE),
        }
    }

    /// Messages until the answer to request `id`: (what came before, the answer).
    pub async fn until_answer(&mut self, id: i64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// Whether the stream ended (the connection closed) before another message.
    pub async fn ended(&mut self) -> bool {
        matches!(
            tokio::time::timeout(*PATIENCE, self.messages.recv()).await,
            Ok(None)
        )
    }
}

/// A Streamable HTTP client: one connection, its stream open.
pub struct HttpClient {
    pub url: String,
    pub connection: String,
    pub stream: Stream,
    next_id: i64,
}

impl HttpClient {
    /// `initialize` (ACP `version`), then the connection's stream.
    pub async fn connect(url: &str, version: u16) -> (Self, Value) {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize",
            "params":{"protocolVersion":version,"clientCapabilities":{}}});
        let response = post(url, &[], &init).await;
        assert_eq!(response.status(), 200);
        let connection = response
            .headers()
            .get("acp-connection-id")
            .expect("the connection id")
            .to_str()
            .unwrap()
            .to_string();
        let answer: Value = response.json().await.unwrap();
        let stream = Stream::open(url, &connection, None).await;
        (
            Self {
                url: url.to_string(),
                connection,
                stream,
                next_id: 1,
            },
            answer,
        )
    }

    /// POST a request (with the session header when it names a session);
    /// returns its id after the 202.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        let response = self.send(&message).await;
        assert_eq!(
            response.status(),
            202,
            "{method}: {:?}",
            response.text().await
        );
        id
    }

    /// POST any message with this connection's (and its session's) headers.
    pub async fn send(&self, message: &Value) -> reqwest::Response {
        let session = message["params"]["sessionId"].as_str().map(str::to_string);
        let mut headers = vec![("acp-connection-id", self.connection.as_str())];
        if let Some(session) = &session {
            headers.push(("acp-session-id", session.as_str()));
        }
        post(&self.url, &headers, message).await
    }

    /// `session/new` in `cwd`: the new session's id (answered on the
    /// connection's stream).
    pub async fn new_session(&mut self, cwd: &Path) -> String {
        let id = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let (_, answer) = self.stream.until_answer(id).await;
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    }

    /// A session's own stream on this connection.
    pub async fn session_stream(&self, session: &str) -> Stream {
        Stream::open(&self.url, &self.connection, Some(session)).await
    }

    /// DELETE this connection.
    pub async fn delete(&self) -> reqwest::StatusCode {
        reqwest::Client::new()
            .delete(&self.url)
            .bearer_auth(TOKEN)
            .header("acp-connection-id", &self.connection)
            .send()
            .await
            .unwrap()
            .status()
    }
}
