//! Test harness: a real local HTTP server that streams scripted SSE bytes
//! (split wherever a test wants, including inside UTF-8 characters), and a
//! driver that spawns the built `crucible-agent` binary and speaks JSON-RPC
//! to it over its pipes, as an editor would.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Notify, mpsc};

/// Generous upper bound for anything to happen; a hang guard, not a speed check.
/// How long a test waits for the agent's next message. A real model on a
/// busy CI machine can need longer: `CRUCIBLE_TEST_PATIENCE_SECS` (make e2e).
pub static PATIENCE: std::sync::LazyLock<Duration> = std::sync::LazyLock::new(|| {
    let secs = std::env::var("CRUCIBLE_TEST_PATIENCE_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(secs)
});

// ---------------------------------------------------------------- LLM server

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// When the request's body had come in.
    pub arrived: std::time::Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The text of the last user message in a chat request.
    pub fn last_user_text(&self) -> String {
        self.body["messages"]
            .as_array()
            .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
            .map(|m| match &m["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default()
    }
}

/// What the server answers one request with.
#[derive(Clone)]
pub enum Reply {
    /// `200 text/event-stream`, written piece by piece with a pause between.
    Stream {
        pieces: Vec<Vec<u8>>,
        pause: Duration,
        /// After the pieces, keep the connection open without sending more.
        hang: bool,
        /// Hold the first piece until this is notified.
        gate: Option<Arc<Notify>>,
        content_type: &'static str,
    },
    /// A complete response with a body.
    Full {
        status: u16,
        content_type: &'static str,
        body: String,
        headers: Vec<(String, String)>,
    },
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Reply::Full {
            status,
            content_type: "application/json",
            body: body.to_string(),
            headers: Vec::new(),
        }
    }

    pub fn stream(bytes: Vec<u8>, split: Split) -> Self {
        Reply::Stream {
            pieces: split.apply(&bytes),
            pause: Duration::from_millis(2),
            hang: false,
            gate: None,
            content_type: "text/event-stream",
        }
    }

    /// Ollama streams `application/x-ndjson`.
    pub fn ndjson(mut self) -> Self {
        if let Reply::Stream { content_type, .. } = &mut self {
            *content_type = "application/x-ndjson";
        }
        self
    }

    pub fn hanging(mut self) -> Self {
        if let Reply::Stream { hang, .. } = &mut self {
            *hang = true;
        }
        self
    }

    pub fn gated(mut self, notify: Arc<Notify>) -> Self {
        if let Reply::Stream { gate, .. } = &mut self {
            *gate = Some(notify);
        }
        self
    }

    pub fn paced(mut self, every: Duration) -> Self {
        if let Reply::Stream { pause, .. } = &mut self {
            *pause = every;
        }
        self
    }
}

/// How to cut a byte stream into network writes.
#[derive(Clone, Copy)]
pub enum Split {
    Whole,
    /// Every N bytes (N small and odd cuts through lines and characters).
    Every(usize),
    /// Right after the first byte of every multi-byte UTF-8 character, and
    /// at every newline.
    InsideCharacters,
}

impl Split {
    fn apply(self, bytes: &[u8]) -> Vec<Vec<u8>> {
        match self {
            Split::Whole => vec![bytes.to_vec()],
            Split::Every(n) => bytes.chunks(n.max(1)).map(<[u8]>::to_vec).collect(),
            Split::InsideCharacters => {
                let mut pieces = Vec::new();
                let mut current = Vec::new();
                for &byte in bytes {
                    current.push(byte);
                    let starts_multibyte = byte >= 0xC0;
                    if starts_multibyte || byte == b'\n' {
                        pieces.push(std::mem::take(&mut current));
                    }
                }
                if !current.is_empty() {
                    pieces.push(current);
                }
                pieces
            }
        }
    }
}

// ---------------------------------------------------------- wire formats

/// The three provider wire formats, with their recorded streams
/// (`tests/fixtures`) and error bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
    Ollama,
}

pub const WIRES: [Wire; 3] = [Wire::OpenAi, Wire::Anthropic, Wire::Ollama];
impl Wire {
    pub fn kind(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
            Wire::Ollama => "ollama",
        }
    }

    pub fn endpoint(self, server: &LlmServer) -> String {
        match self {
            Wire::OpenAi => server.base_url(),
            Wire::Anthropic | Wire::Ollama => format!("http://127.0.0.1:{}", server.port),
        }
    }

    pub fn chat_path(self) -> &'static str {
        match self {
            Wire::OpenAi => "/v1/chat/completions",
            Wire::Anthropic => "/v1/messages",
            Wire::Ollama => "/api/chat",
        }
    }

    pub fn fixture(self, scenario: &str) -> Vec<u8> {
        let (dir, ext) = match self {
            Wire::OpenAi => ("openai", "sse"),
            Wire::Anthropic => ("anthropic", "sse"),
            Wire::Ollama => ("ollama", "ndjson"),
        };
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(dir)
            .join(format!("{scenario}.{ext}"));
        std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    pub fn stream(self, scenario: &str, split: Split) -> Reply {
        let reply = Reply::stream(self.fixture(scenario), split);
        match self {
            Wire::Ollama => reply.ndjson(),
            _ => reply,
        }
    }

    /// The error body each API sends with a failing status.
    pub fn error(self, status: u16, message: &str) -> Reply {
        let body = match self {
            Wire::OpenAi => json!({"error": {"message": message, "type": "server_error"}}),
            Wire::Anthropic => {
                json!({"type": "error", "error": {"type": "api_error", "message": message}})
            }
            Wire::Ollama => json!({"error": message}),
        };
        Reply::json(status, body)
    }

    pub fn models(self) -> Reply {
        match self {
            Wire::OpenAi => Reply::json(
                200,
                json!({"object": "list", "data": [{"id": "test-model", "meta": {"n_ctx": 4096}}, {"id": "other-model"}]}),
            ),
            Wire::Anthropic => Reply::json(
                200,
                json!({"data": [{"type": "model", "id": "claude-test-model", "display_name": "Claude Test"}, {"type": "model", "id": "other-model"}], "has_more": false}),
            ),
            Wire::Ollama => Reply::json(
                200,
                json!({"models": [{"name": "test-model:latest", "model": "test-model:latest"}, {"name": "other-model:latest", "model": "other-model:latest"}]}),
            ),
        }
    }

    /// A prompt-cache warm-up (a chat request for one token) gets a short
    /// answer of its wire format; anything else is None.
    pub fn warm_up(request: &Recorded) -> Option<Reply> {
        let body = &request.body;
        let wire = WIRES
            .into_iter()
            .find(|wire| request.path.ends_with(wire.chat_path()))?;
        let one_token = match wire {
            Wire::Ollama => body["options"]["num_predict"] == 1,
            Wire::OpenAi | Wire::Anthropic => body["max_tokens"] == 1,
        };
        one_token.then(|| wire.stream("text", Split::Whole))
    }

    pub fn is_metadata(self, path: &str) -> bool {
        let path = path.split('?').next().unwrap_or(path);
        path.ends_with("/models") || path.ends_with("/api/tags") || path.ends_with("/api/show")
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

pub struct LlmServer {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Prompt-cache warm-ups, answered by the server itself (see [`Wire::warm_up`]).
    warmups: Arc<Mutex<Vec<Recorded>>>,
    /// When set, warm-up answers wait for it.
    warmup_gate: Arc<Mutex<Option<Arc<Notify>>>>,
    disconnects: Arc<Notify>,
}

impl LlmServer {
    /// Serve `handler`'s replies on 127.0.0.1 (a port of its own).
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let warmups = Arc::new(Mutex::new(Vec::new()));
        let warmup_gate: Arc<Mutex<Option<Arc<Notify>>>> = Arc::default();
        let disconnects = Arc::new(Notify::new());
        let handler: Arc<Handler> = Arc::new(handler);
        {
            let requests = Arc::clone(&requests);
            let warmups = Arc::clone(&warmups);
            let warmup_gate = Arc::clone(&warmup_gate);
            let disconnects = Arc::clone(&disconnects);
            let handler = Arc::clone(&handler);
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    let requests = Arc::clone(&requests);
                    let warmups = Arc::clone(&warmups);
                    let disconnects = Arc::clone(&disconnects);
                    let handler = Arc::clone(&handler);
                    let log = Log {
                        requests,
                        warmups,
                        warmup_gate: warmup_gate.lock().unwrap().clone(),
                    };
                    tokio::spawn(serve_one(socket, log, disconnects, handler));
                }
            });
        }
        Self {
            port,
            requests,
            warmups,
            warmup_gate,
            disconnects,
        }
    }

    /// A server whose `/models` lists `test-model` and whose chat answers
    /// come from `chat`.
    pub async fn chat(chat: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        Self::start(move |request| {
            if request.path.ends_with("/models") {
                models_reply(&["test-model"])
            } else {
                chat(request)
            }
        })
        .await
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request but the prompt-cache warm-ups.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The prompt-cache warm-ups the agent sent (one-token requests).
    pub fn warmups(&self) -> Vec<Recorded> {
        self.warmups.lock().unwrap().clone()
    }

    /// Hold the answers to later warm-ups until the returned gate is notified.
    pub fn hold_warmups(&self) -> Arc<Notify> {
        let gate = Arc::new(Notify::new());
        *self.warmup_gate.lock().unwrap() = Some(Arc::clone(&gate));
        gate
    }

    /// Wait until the agent has sent `count` warm-ups.
    pub async fn wait_warmups(&self, count: usize) -> Vec<Recorded> {
        let deadline = tokio::time::Instant::now() + *PATIENCE;
        loop {
            let warmups = self.warmups();
            if warmups.len() >= count {
                return warmups;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} warm-ups, not {count}",
                warmups.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn chat_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| {
                r.path.ends_with("/chat/completions")
                    || r.path.ends_with("/v1/messages")
                    || r.path.ends_with("/api/chat")
            })
            .collect()
    }

    /// Wait until a client drops a streaming connection the server held open.
    pub async fn wait_disconnect(&self) {
        tokio::time::timeout(*PATIENCE, self.disconnects.notified())
            .await
            .expect("the agent never closed the provider connection");
    }
}

/// Where a server keeps what it was sent.
struct Log {
    requests: Arc<Mutex<Vec<Recorded>>>,
    warmups: Arc<Mutex<Vec<Recorded>>>,
    warmup_gate: Option<Arc<Notify>>,
}

async fn serve_one(socket: TcpStream, log: Log, disconnects: Arc<Notify>, handler: Arc<Handler>) {
    let mut reader = BufReader::new(socket);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((key, value)) = line.split_once(':') {
            let (key, value) = (key.trim().to_string(), value.trim().to_string());
            if key.eq_ignore_ascii_case("content-length") {
                length = value.parse().unwrap_or(0);
            }
            headers.push((key, value));
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).await.is_err() {
        return;
    }
    let recorded = Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        arrived: std::time::Instant::now(),
    };
    // A warm-up is answered here, so scripted replies stay one per real
    // model call.
    let reply = match Wire::warm_up(&recorded) {
        Some(reply) => {
            log.warmups.lock().unwrap().push(recorded);
            match log.warmup_gate {
                Some(gate) => reply.gated(gate),
                None => reply,
            }
        }
        None => {
            log.requests.lock().unwrap().push(recorded.clone());
            handler(&recorded)
        }
    };
    let mut socket = reader.into_inner();
    match reply {
        Reply::Full {
            status,
            content_type,
            body,
            headers,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
                reason(status),
                body.len()
            );
            for (key, value) in headers {
                head.push_str(&format!("{key}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Reply::Stream {
            pieces,
            pause,
            hang,
            gate,
            content_type,
        } => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
            );
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let _ = socket.flush().await;
            if let Some(gate) = gate {
                gate.notified().await;
            }
            for piece in pieces {
                if socket.write_all(&piece).await.is_err() || socket.flush().await.is_err() {
                    disconnects.notify_one();
                    return;
                }
                tokio::time::sleep(pause).await;
            }
            if hang {
                // Hold the stream open until the client goes away.
                let mut buf = [0u8; 64];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            disconnects.notify_one();
                            return;
                        }
                        Ok(_) => {}
                    }
                }
            }
            let _ = socket.shutdown().await;
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

/// SSE bytes of an OpenAI chat-completions stream: one event per delta,
/// a finish chunk, a usage chunk and `[DONE]`.
pub fn openai_stream(deltas: &[Value], finish: &str, usage: (u64, u64)) -> Vec<u8> {
    let mut out = String::new();
    let mut event = |data: &str| {
        out.push_str("data: ");
        out.push_str(data);
        out.push_str("\n\n");
    };
    event(&json!({"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}).to_string());
    for delta in deltas {
        event(&json!({"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":delta,"finish_reason":null}]}).to_string());
    }
    event(&json!({"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":finish}]}).to_string());
    event(&json!({"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":usage.0,"completion_tokens":usage.1,"total_tokens":usage.0+usage.1}}).to_string());
    event("[DONE]");
    out.into_bytes()
}

/// A stream of text deltas, one per word-piece given.
pub fn text_stream(pieces: &[&str]) -> Vec<u8> {
    let deltas: Vec<Value> = pieces.iter().map(|p| json!({ "content": p })).collect();
    openai_stream(&deltas, "stop", (42, pieces.len() as u64))
}

/// Only the opening events of a stream (no finish, no `[DONE]`).
pub fn stream_head(pieces: &[&str]) -> Vec<u8> {
    let mut out = String::new();
    for piece in pieces {
        out.push_str(&format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{"content":piece},"finish_reason":null}]})
        ));
    }
    out.into_bytes()
}

pub fn models_reply(ids: &[&str]) -> Reply {
    let data: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "object": "model", "owned_by": "test"}))
        .collect();
    Reply::json(200, json!({"object":"list","data": data}))
}

// ---------------------------------------------------------------- agent

pub struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Value>,
    stderr: Arc<Mutex<String>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    /// Owns the read end of the agent's stdout (aborting it closes the pipe).
    stdout_task: tokio::task::JoinHandle<()>,
    next_id: i64,
    /// Messages read while waiting for something else.
    pub backlog: Vec<Value>,
    pub dir: tempfile::TempDir,
    /// How long to wait for the next message ([`PATIENCE`] unless a test
    /// expects longer silences).
    pub patience: Duration,
}

/// The test MCP server (`tests/fixtures/mcp/echo_server.py`) as a
/// `session/new` stdio entry named `fx`.
pub fn echo_mcp_server() -> Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    json!({"name": "fx", "command": "python3", "args": [script], "env": []})
}

/// The binary under test: `CRUCIBLE_AGENT_BIN` when set (`make test` runs
/// the Crucible-client module on the release build too), else this build's.
pub fn agent_binary() -> std::ffi::OsString {
    std::env::var_os("CRUCIBLE_AGENT_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_crucible-agent").into())
}

pub fn config_for(server: &LlmServer, model: &str) -> String {
    format!(
        "[chat]\ndefault_provider = \"local\"\n\n[llm.providers.local]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"{model}\"\nretry_base_delay_ms = 20\n",
        server.base_url()
    )
}

impl Agent {
    /// Spawn the binary with `config` written to a fresh config file.
    pub async fn spawn(config: &str) -> Self {
        Self::spawn_with(config, &[], &[]).await
    }

    pub async fn spawn_with(config: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("config.toml");
        std::fs::write(&config_path, config).unwrap();
        let mut command = Command::new(agent_binary());
        command
            .arg("--config")
            .arg(&config_path)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(args)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env("RUST_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the agent binary starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout_task = tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                // stdout must carry protocol messages only.
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| json!({"NOT_PROTOCOL": line.clone()}));
                // A batch's answers come as one array line of them.
                let message = |v: &Value| v.get("jsonrpc") == Some(&json!("2.0"));
                let protocol = match &value {
                    Value::Array(entries) => !entries.is_empty() && entries.iter().all(message),
                    value => message(value),
                };
                if !protocol {
                    let _ = tx.send(json!({"NOT_PROTOCOL": line}));
                    continue;
                }
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_task = {
            let stderr = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut reader = BufReader::new(stderr_pipe).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let mut text = stderr.lock().unwrap();
                    text.push_str(&line);
                    text.push('\n');
                }
            })
        };
        Self {
            child,
            stdin,
            lines,
            stderr,
            stderr_task: Some(stderr_task),
            stdout_task,
            next_id: 100,
            backlog: Vec::new(),
            dir,
            patience: *PATIENCE,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn cwd(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string()).await;
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc":"2.0","method":method,"params":params}))
            .await;
    }

    /// Send a request; returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        id
    }

    /// The next message from the agent, whatever it is.
    pub async fn next_message(&mut self) -> Value {
        if !self.backlog.is_empty() {
            return self.backlog.remove(0);
        }
        self.read_message().await
    }

    async fn read_message(&mut self) -> Value {
        match tokio::time::timeout(self.patience, self.lines.recv()).await {
            Ok(Some(message)) => {
                assert!(
                    message.get("NOT_PROTOCOL").is_none(),
                    "non-protocol bytes on stdout: {message}"
                );
                message
            }
            Ok(None) => panic!("the agent closed stdout; stderr:\n{}", self.stderr()),
            Err(_) => panic!(
                "no message from the agent in {:?}; stderr:\n{}",
                self.patience,
                self.stderr()
            ),
        }
    }

    /// Read until the response to `id`; returns the notifications and
    /// requests seen on the way (in order) and the response.
    pub async fn response(&mut self, id: i64) -> (Vec<Value>, Value) {
        let mut seen = Vec::new();
        let mut rest = Vec::new();
        let backlog = std::mem::take(&mut self.backlog);
        let mut found = None;
        for message in backlog {
            let is_response = message.get("method").is_none();
            if found.is_none() && is_response && message.get("id") == Some(&json!(id)) {
                found = Some(message);
            } else if found.is_none() && !is_response {
                seen.push(message);
            } else {
                rest.push(message);
            }
        }
        self.backlog = rest;
        if let Some(found) = found {
            return (seen, found);
        }
        let mut other_responses = Vec::new();
        loop {
            let message = self.read_message().await;
            let is_response = message.get("method").is_none();
            if is_response && message.get("id") == Some(&json!(id)) {
                // Answers to other requests stay for whoever waits for them.
                self.backlog.extend(other_responses);
                return (seen, message);
            }
            if is_response {
                other_responses.push(message);
            } else {
                seen.push(message);
            }
        }
    }

    /// Request and wait for the answer.
    pub async fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    /// `session/load` of `session` in `cwd` with no MCP servers: what the
    /// load replayed, and its answer.
    pub async fn load(&mut self, session: &str, cwd: PathBuf) -> (Vec<Value>, Value) {
        self.call(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await
    }

    pub async fn initialize(&mut self) -> Value {
        let (_, response) = self
            .call(
                "initialize",
                json!({"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false},"clientInfo":{"name":"harness","version":"0"}}),
            )
            .await;
        response
    }

    /// Initialize as a client that shows forms (ACP elicitation).
    pub async fn initialize_with_forms(&mut self) {
        let (_, response) = self
            .call(
                "initialize",
                json!({"protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false},
                        "terminal": false, "elicitation": {"form": {}}},
                    "clientInfo": {"name": "forms", "version": "0"}}),
            )
            .await;
        assert!(response.get("result").is_some(), "{response}");
    }

    /// Initialize and open a session in the agent's temp dir; returns its id.
    pub async fn start_session(&mut self) -> String {
        self.initialize().await;
        self.new_session().await
    }

    /// `initialize`, then a session with `servers` as its `mcpServers`.
    pub async fn start_session_with(&mut self, servers: Value) -> String {
        self.initialize().await;
        self.new_session_with(servers).await
    }

    pub async fn new_session(&mut self) -> String {
        self.new_session_with(json!([])).await
    }

    pub async fn new_session_with(&mut self, servers: Value) -> String {
        let cwd = self.cwd();
        let (_, response) = self
            .call("session/new", json!({"cwd": cwd, "mcpServers": servers}))
            .await;
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {response}"))
            .to_string()
    }

    pub async fn prompt(&mut self, session: &str, text: &str) -> (Vec<Value>, Value) {
        self.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type":"text","text": text}]}),
        )
        .await
    }

    /// Send a text prompt without waiting for its answer; returns the request id.
    pub async fn start_prompt(&mut self, session: &str, text: &str) -> i64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type":"text","text": text}]}),
        )
        .await
    }

    /// Wait for the first `session/update` of this kind, keeping others.
    pub async fn wait_for_update(&mut self, kind: &str) -> Value {
        self.wait_for(|m| m["params"]["update"]["sessionUpdate"] == kind)
            .await
    }

    /// Wait for the first notification matching `pred`, keeping others.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(pos);
        }
        loop {
            let message = self.read_message().await;
            if pred(&message) {
                return message;
            }
            self.backlog.push(message);
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Close the read end of the agent's stdout, as a client that went away
    /// would: the agent's next write fails with a broken pipe.
    pub fn close_stdout(&mut self) {
        self.stdout_task.abort();
    }

    /// Send SIGTERM, as a service manager or an editor quitting would.
    pub fn terminate(&self) {
        let pid = self.child.id().expect("the agent is running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Wait for the process to exit and its stderr to be read to the end.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let status = tokio::time::timeout(*PATIENCE, self.child.wait())
            .await
            .expect("the agent did not exit")
            .unwrap();
        if let Some(task) = self.stderr_task.take() {
            let _ = tokio::time::timeout(*PATIENCE, task).await;
        }
        status
    }

    /// Everything left on stdout after the process exited.
    pub async fn drain(&mut self) -> Vec<Value> {
        let mut out = std::mem::take(&mut self.backlog);
        while let Ok(Some(message)) = tokio::time::timeout(*PATIENCE, self.lines.recv()).await {
            out.push(message);
        }
        out
    }
}

/// Concatenated text of `agent_message_chunk` updates for `session`.
pub fn agent_text(messages: &[Value], session: &str) -> String {
    chunk_text(messages, session, "agent_message_chunk")
}

pub fn thought_text(messages: &[Value], session: &str) -> String {
    chunk_text(messages, session, "agent_thought_chunk")
}

fn chunk_text(messages: &[Value], session: &str, kind: &str) -> String {
    updates(messages, session, kind)
        .iter()
        .map(|update| {
            update["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The `update` objects of `session/update` notifications of one kind.
pub fn updates(messages: &[Value], session: &str, kind: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| m["params"]["update"].clone())
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

pub fn error_message(response: &Value) -> String {
    response["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {response}"))
        .to_string()
}

// ---------------------------------------------------------- tools

/// What the scripted model does: the tool calls it makes, one per request,
/// until they run out; then it answers with text.
pub fn scripted_model(calls: Vec<(&'static str, Value)>) -> impl Fn(&Recorded) -> Reply {
    let next = Arc::new(Mutex::new(0usize));
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        let mut n = next.lock().unwrap();
        let reply = match calls.get(*n) {
            Some((name, arguments)) => openai_stream(
                &[
                    json!({"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}}]}),
                ],
                "tool_calls",
                (50, 10),
            ),
            None => {
                let last = request.body["messages"].as_array().unwrap().last().unwrap();
                let answer = format!(
                    "Done. Last result: {}",
                    last["content"].as_str().unwrap_or("")
                );
                openai_stream(&[json!({"content": answer})], "stop", (60, 5))
            }
        };
        *n += 1;
        Reply::stream(reply, Split::Every(11))
    }
}

pub fn tool_updates<'a>(seen: &'a [Value], kind: &str) -> Vec<&'a Value> {
    seen.iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// Answer the next permission request with `option`; returns the request.
pub async fn answer_permission(agent: &mut Agent, option: &str) -> Value {
    let request = agent
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    agent
        .send(&json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": option}}}))
        .await;
    request
}

// ---------------------------------------------------------- sessions on disk

impl Agent {
    /// Another agent process on the same data dir as `other` (its `data`
    /// directory is a symlink to `other`'s), as Zed and a TUI would share one.
    pub async fn spawn_sharing(config: &str, other: &Agent) -> Self {
        let agent = Self::spawn(config).await;
        std::os::unix::fs::symlink(other.data_dir(), agent.dir.path().join("data")).unwrap();
        agent
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn session_dir(&self, session: &str) -> PathBuf {
        self.data_dir().join("sessions").join(session)
    }

    /// SIGKILL, as a crash or `kill -9` would; the temp dir stays.
    pub async fn kill(&mut self) {
        self.child.start_kill().unwrap();
        let _ = tokio::time::timeout(*PATIENCE, self.child.wait()).await;
    }
}

/// The conversation in a list of messages, as a client would render it:
/// `session/update`s of the conversation kinds for `session`, with
/// consecutive chunks of one kind joined.
pub fn conversation(messages: &[Value], session: &str) -> Vec<Value> {
    const KINDS: [&str; 6] = [
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    ];
    let mut out: Vec<Value> = Vec::new();
    for message in messages {
        if message["method"] != "session/update" || message["params"]["sessionId"] != session {
            continue;
        }
        let update = &message["params"]["update"];
        let kind = update["sessionUpdate"].as_str().unwrap_or_default();
        if !KINDS.contains(&kind) {
            continue;
        }
        if kind.ends_with("_chunk")
            && let Some(last) = out.last_mut()
            && last["sessionUpdate"] == kind
            && last["content"]["type"] == "text"
            && update["content"]["type"] == "text"
        {
            let joined = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap_or_default(),
                update["content"]["text"].as_str().unwrap_or_default()
            );
            last["content"]["text"] = json!(joined);
            continue;
        }
        out.push(update.clone());
    }
    out
}

/// A `user_message_chunk` update as a live prompt would have shown it.
pub fn user_update(session: &str, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
        "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}}})
}

/// Where to make directories that no temp directory contains: the
/// target's scratch dir, or under HOME when the checkout itself lives in a
/// temp directory (as CI's clone may).
pub fn outside_temp_base() -> std::path::PathBuf {
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let mut temps: Vec<std::path::PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .map(Into::into)
        .collect();
    temps.extend(std::env::var_os("TMPDIR").map(Into::into));
    if !temps.iter().any(|temp| base.starts_with(temp)) {
        return base;
    }
    let home = std::env::var_os("HOME").map_or_else(|| "/root".into(), std::path::PathBuf::from);
    let base = home.join(".cache/crucible-agent-sandbox-tests");
    std::fs::create_dir_all(&base).unwrap();
    base
}
