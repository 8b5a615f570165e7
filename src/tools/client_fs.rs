//! Files through the editor (`fs/read_text_file`, `fs/write_text_file`) when
//! the client offers them: the model then sees unsaved buffers, and its
//! edits land in the editor with undo. Whatever the client does not offer
//! falls back to the local disk.

use std::path::Path;
use std::sync::Arc;

use super::{ConfinedPath, FileSystem, FsFuture, LineWindow, LocalFs, ToolError};
use crate::client::{ClientError, ClientFuture, ClientSink, ReadTextFile, WriteTextFile};
use crate::model::SessionId;

pub struct ClientFs {
    pub session_id: SessionId,
    pub sink: Arc<dyn ClientSink>,
    pub read: bool,
    pub write: bool,
    pub local: LocalFs,
}

/// The editor's answer to a request about `path`, its errors told as the
/// tools tell them.
fn editor_answer<'a, T: 'a>(path: &'a Path, answer: ClientFuture<'a, T>) -> FsFuture<'a, T> {
    Box::pin(async move { answer.await.map_err(|err| client_error(path, err)) })
}

fn client_error(path: &Path, err: ClientError) -> ToolError {
    match err {
        ClientError::NotFound(_) => ToolError::NotFound {
            path: path.display().to_string(),
        },
        err => ToolError::Failed(format!(
            "the editor could not access {}: {err}",
            path.display()
        )),
    }
}

impl FileSystem for ClientFs {
    fn read_text_file<'a>(
        &'a self,
        place: &'a ConfinedPath,
        window: LineWindow,
    ) -> FsFuture<'a, String> {
        if !self.read {
            return self.local.read_text_file(place, window);
        }
        let path = place.path();
        let request = ReadTextFile {
            session_id: self.session_id.clone(),
            path: path.to_path_buf(),
            line: window.line,
            limit: window.limit,
        };
        editor_answer(path, self.sink.read_text_file(request))
    }

    fn write_text_file<'a>(
        &'a self,
        place: &'a ConfinedPath,
        content: &'a str,
    ) -> FsFuture<'a, ()> {
        if !self.write {
            return self.local.write_text_file(place, content);
        }
        let path = place.path();
        let request = WriteTextFile {
            session_id: self.session_id.clone(),
            path: path.to_path_buf(),
            content: content.to_string(),
        };
        editor_answer(path, self.sink.write_text_file(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::testing::RecordingClient;
    use crate::tools::fs::testing::place;

    fn fs(client: RecordingClient, read: bool, write: bool) -> (Arc<RecordingClient>, ClientFs) {
        let client = Arc::new(client);
        let fs = ClientFs {
            session_id: "s".into(),
            sink: client.clone(),
            read,
            write,
            local: LocalFs::default(),
        };
        (client, fs)
    }

    #[tokio::test]
    async fn offered_operations_go_to_the_editor() {
        let path = Path::new("/project/buffer.txt");
        let buffer = place("/project", "buffer.txt");
        let (client, fs) = fs(
            RecordingClient::default().with_file(path, "unsaved"),
            true,
            true,
        );
        assert_eq!(
            fs.read_text_file(&buffer, LineWindow::WHOLE).await.unwrap(),
            "unsaved"
        );
        fs.write_text_file(&buffer, "new").await.unwrap();
        assert_eq!(client.file(path).as_deref(), Some("new"));
        let missing = fs
            .read_text_file(&place("/project", "nope"), LineWindow::WHOLE)
            .await
            .unwrap_err();
        assert!(matches!(missing, ToolError::NotFound { .. }), "{missing}");
        assert_eq!(
            client.requests(),
            ["read_text_file", "write_text_file", "read_text_file"]
        );
    }

    #[tokio::test]
    async fn what_the_editor_does_not_offer_uses_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = place(dir.path(), "a.txt");
        let (client, fs) = fs(RecordingClient::default(), false, false);
        fs.write_text_file(&path, "on disk").await.unwrap();
        assert_eq!(
            fs.read_text_file(&path, LineWindow::WHOLE).await.unwrap(),
            "on disk"
        );
        assert!(client.requests().is_empty());
    }

    #[test]
    fn editor_errors_keep_their_message_unless_they_mean_not_found() {
        let path = Path::new("/a");
        let table = [
            (ClientError::NotFound("gone".into()), None),
            (
                ClientError::Failed("denied".into()),
                Some("the editor could not access /a: denied"),
            ),
        ];
        for (err, expected) in table {
            match (client_error(path, err.clone()), expected) {
                (ToolError::NotFound { path }, None) => assert_eq!(path, "/a"),
                (ToolError::Failed(message), Some(expected)) => assert_eq!(message, expected),
                (other, _) => panic!("{err:?} became {other:?}"),
            }
        }
    }
}
