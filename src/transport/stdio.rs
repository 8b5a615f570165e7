//! The stdio carrier: one JSON-RPC message per line (newline-delimited
//! JSON) on stdin and stdout. The connection above it sees whole messages
//! only ([`jsonrpc::parse`] in, encoded messages from [`Outgoing`] out), so
//! another carrier (HTTP, WebSocket) frames them its own way.

use std::io::Write;

use agent_client_protocol_schema::v1::RequestId;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};
use tokio::sync::oneshot;

use super::Outgoing;
use super::jsonrpc::{self, Incoming, RpcError};

/// Writes the outgoing lines to stdout from a thread of its own.
/// `tokio::io::stdout()` hands every write and flush to the blocking pool, a
/// thread hop for each streamed chunk; this thread blocks on the queue and
/// writes directly. Resolves when every sender is gone (after the final
/// flush) or stdout fails (the client closed its end).
pub fn spawn_stdout_writer(
    lines: Outgoing,
) -> std::io::Result<oneshot::Receiver<std::io::Result<()>>> {
    let (done, finished) = oneshot::channel();
    std::thread::Builder::new()
        .name("stdout".into())
        .spawn(move || {
            let written = write_lines(lines, std::io::stdout().lock());
            // Nobody waits any more only when the server is already gone.
            let _ = done.send(written);
        })?;
    Ok(finished)
}

/// Resolves when the client closes its end of stdout, even while nothing
/// is written (where the platform can tell; see [`crate::platform::stdout_closed`]).
pub async fn stdout_closed() {
    crate::platform::stdout_closed().await;
}

/// Drain `lines` into `output`, one message per line, blocking the thread.
/// Flushes whenever the queue is momentarily empty, so a burst is written in
/// one go and a single message is never held back. Returns when every sender
/// is gone or the output fails.
fn write_lines(mut lines: Outgoing, output: impl Write) -> std::io::Result<()> {
    let mut output = std::io::BufWriter::with_capacity(64 * 1024, output);
    while let Some(mut line) = lines.blocking_recv() {
        line.push(b'\n');
        output.write_all(&line)?;
        if lines.is_empty() {
            output.flush()?;
        }
    }
    output.flush()
}

/// The peer's first message, read with blocking I/O before any runtime or
/// thread exists (see `acp::handshake`). Blank lines are skipped; `None` at
/// EOF. Whatever the client sent after it stays buffered in `input`.
pub fn read_first_message(input: &mut impl std::io::BufRead) -> std::io::Result<Option<Incoming>> {
    use std::io::{BufRead, Read};
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        if (&mut *input).take(limit).read_until(b'\n', &mut line)? == 0 {
            return Ok(None);
        }
        if line.len() > MAX_LINE_BYTES && line.last() != Some(&b'\n') {
            // Skip to the end of the line, as `run_reader` does.
            input.skip_until(b'\n')?;
            return Ok(Some(overlong_line()));
        }
        if let Some(message) = jsonrpc::parse(&line) {
            return Ok(Some(message));
        }
    }
}

/// Answer a request straight to `output` and flush: only for the
/// handshake, before the writer thread owns the output.
pub fn respond_now(
    output: &mut impl Write,
    id: &RequestId,
    result: &Result<Value, RpcError>,
) -> std::io::Result<()> {
    let mut line = jsonrpc::encode_response(id, result);
    line.push(b'\n');
    output.write_all(&line)?;
    output.flush()
}

/// The longest line `run_reader` reads: a longer one is answered with an
/// error and skipped, so a client cannot make the agent buffer without bound
/// (a prompt with large images still fits).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Discard input up to and including the next newline (or EOF).
async fn skip_rest_of_line(input: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<()> {
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => {
                input.consume(end + 1);
                return Ok(());
            }
            None => {
                let all = buffer.len();
                input.consume(all);
            }
        }
    }
}

/// What a line over [`MAX_LINE_BYTES`] becomes: an error answer, the line skipped.
fn overlong_line() -> Incoming {
    Incoming::Invalid(jsonrpc::Invalid {
        id: None,
        error: RpcError::invalid_request(format!(
            "a line longer than {} MiB was skipped (the most one message may take)",
            MAX_LINE_BYTES >> 20
        )),
    })
}

/// Read lines until EOF, handing each parsed message to `on_message`.
/// Lines are split on `\n` as bytes, so UTF-8 is decoded only on whole lines.
pub async fn run_reader(
    input: impl AsyncBufRead + Unpin,
    mut on_message: impl FnMut(Incoming),
) -> std::io::Result<()> {
    let mut input = input;
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = (&mut input)
            .take(limit)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            return Ok(());
        }
        if line.len() > MAX_LINE_BYTES && line.last() != Some(&b'\n') {
            skip_rest_of_line(&mut input).await?;
            on_message(overlong_line());
            line = Vec::with_capacity(4096);
            continue;
        }
        if let Some(message) = jsonrpc::parse(&line) {
            on_message(message);
        }
        if line.capacity() > 1024 * 1024 {
            // One huge prompt should not pin its buffer for the process lifetime.
            line = Vec::with_capacity(4096);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Connection;
    use crate::transport::jsonrpc::Message;
    use serde_json::json;

    #[test]
    fn writer_keeps_order_and_frames_lines() {
        let (connection, rx) = Connection::new();
        for n in 0..100 {
            connection.notify("session/update", &json!({ "n": n }));
        }
        drop(connection);
        let mut out = Vec::new();
        write_lines(rx, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let numbers: Vec<i64> = text
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["params"]["n"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(numbers, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn an_overlong_first_line_is_skipped_and_what_follows_stays_buffered() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n");
        let mut reader = std::io::BufReader::new(input.as_slice());
        assert!(matches!(
            read_first_message(&mut reader).unwrap(),
            Some(Incoming::Invalid(_))
        ));
        assert!(matches!(
            read_first_message(&mut reader).unwrap(),
            Some(Incoming::Message(Message::Notification(_)))
        ));
    }

    #[tokio::test]
    async fn reader_splits_lines_and_keeps_utf8_whole() {
        let input = "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":{\"t\":\"héllo ✓\"}}\n\nnot json\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}";
        let mut seen = Vec::new();
        run_reader(input.as_bytes(), |message| seen.push(message))
            .await
            .unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[0],
            Incoming::Message(Message::Notification(jsonrpc::Notification {
                method: "a".into(),
                params: json!({"t":"héllo ✓"})
            }))
        );
        assert!(matches!(seen[1], Incoming::Invalid(_)));
        assert!(matches!(
            seen[2],
            Incoming::Message(Message::Notification(_))
        ));
    }

    #[tokio::test]
    async fn an_overlong_line_is_one_error_and_the_next_line_is_read() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n");
        let mut seen = Vec::new();
        run_reader(input.as_slice(), |message| seen.push(message))
            .await
            .unwrap();
        assert_eq!(seen.len(), 2);
        assert!(
            matches!(&seen[0], Incoming::Invalid(invalid) if invalid.error.message.contains("64 MiB"))
        );
        assert!(matches!(
            seen[1],
            Incoming::Message(Message::Notification(_))
        ));
    }
}
