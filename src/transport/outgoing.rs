//! The queue of lines waiting for the writer, bounded by back-pressure: a
//! client that stops reading (a paused editor, a full pipe) must not make
//! the agent buffer a model's whole answer. Sending never blocks, so an
//! answer or a cancel always gets out; instead turns wait for [`Queue::room`]
//! before reading more of a model's stream, and the model's server waits
//! on the socket in turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{Notify, mpsc};

/// Bytes of protocol lines (as allocated) queued for the client past which
/// turns stop reading their model's stream until the client catches up.
pub const MAX_QUEUED_BYTES: usize = 8 << 20;

/// What the senders and the writer share.
#[derive(Default)]
pub struct Queue {
    bytes: AtomicUsize,
    /// The writer is gone: nothing will ever drain the queue again.
    closed: AtomicBool,
    room: Notify,
}

impl Queue {
    pub(super) fn queued(&self, len: usize) {
        self.bytes.fetch_add(len, Ordering::AcqRel);
    }

    fn taken(&self, len: usize) {
        let before = self.bytes.fetch_sub(len, Ordering::AcqRel);
        if before >= MAX_QUEUED_BYTES && before - len < MAX_QUEUED_BYTES {
            self.room.notify_waiters();
        }
    }

    /// Resolves once fewer than [`MAX_QUEUED_BYTES`] wait for the writer,
    /// or the writer is gone (a turn must still end then).
    pub async fn room(&self) {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.closed.load(Ordering::Acquire)
                || self.bytes.load(Ordering::Acquire) < MAX_QUEUED_BYTES
            {
                return;
            }
            notified.await;
        }
    }
}

/// The writer's end: lines in the order they were sent.
pub struct Outgoing {
    lines: mpsc::UnboundedReceiver<Vec<u8>>,
    queue: Arc<Queue>,
}

impl Outgoing {
    pub(super) fn new(lines: mpsc::UnboundedReceiver<Vec<u8>>, queue: Arc<Queue>) -> Self {
        Self { lines, queue }
    }

    fn took(&self, line: Option<Vec<u8>>) -> Option<Vec<u8>> {
        if let Some(line) = &line {
            self.queue.taken(line.capacity());
        }
        line
    }

    pub fn blocking_recv(&mut self) -> Option<Vec<u8>> {
        let line = self.lines.blocking_recv();
        self.took(line)
    }

    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        let line = self.lines.recv().await;
        self.took(line)
    }

    pub fn try_recv(&mut self) -> Result<Vec<u8>, mpsc::error::TryRecvError> {
        let line = self.lines.try_recv()?;
        self.queue.taken(line.capacity());
        Ok(line)
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        self.queue.closed.store(true, Ordering::Release);
        self.queue.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn room_waits_while_the_queue_is_full_and_returns_once_drained_or_closed() {
        let (tx, rx) = mpsc::unbounded_channel();
        let queue = Arc::new(Queue::default());
        let mut outgoing = Outgoing::new(rx, Arc::clone(&queue));
        let line = vec![b'x'; MAX_QUEUED_BYTES / 2];
        for _ in 0..3 {
            queue.queued(line.len());
            tx.send(line.clone()).unwrap();
        }
        let waiting = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.room().await })
        };
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "room while 1.5× the bound is queued"
        );
        outgoing.recv().await.unwrap();
        outgoing.recv().await.unwrap();
        waiting.await.unwrap();

        queue.queued(MAX_QUEUED_BYTES);
        let waiting = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.room().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(outgoing);
        waiting.await.unwrap();
    }
}
