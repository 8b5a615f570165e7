//! Files through the editor (`fs/read_text_file`, `fs/write_text_file`) when
//! the client offers them: the model then sees unsaved buffers, and its
//! edits land in the editor with undo. Whatever the client does not offer
//! falls back to the local disk.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use futures::future::BoxFuture;

use super::{FileSystem, LocalFs, ToolError};
use crate::client::ClientSink;
use crate::transport::jsonrpc::RESOURCE_NOT_FOUND;

pub struct ClientFs {
    pub session_id: String,
    pub sink: Arc<dyn ClientSink>,
    pub read: bool,
    pub write: bool,
    pub local: LocalFs,
}

fn client_error(path: &Path, code: i32, message: String) -> ToolError {
    let lower = message.to_ascii_lowercase();
    if code == RESOURCE_NOT_FOUND || lower.contains("not found") || lower.contains("no such file") {
        return ToolError::NotFound {
            path: path.display().to_string(),
        };
    }
    ToolError::Failed(format!(
        "the editor could not access {}: {message}",
        path.display()
    ))
}

impl FileSystem for ClientFs {
    fn read_text_file<'a>(
        &'a self,
        path: &'a Path,
        line: Option<u32>,
        limit: Option<u32>,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        if !self.read {
            return self.local.read_text_file(path, line, limit);
        }
        Box::pin(async move {
            let request = acp::ReadTextFileRequest::new(self.session_id.clone(), path)
                .line(line)
                .limit(limit);
            let params = serde_json::to_value(&request)
                .map_err(|err| ToolError::Failed(format!("cannot encode the request: {err}")))?;
            let answer = self
                .sink
                .call("fs/read_text_file", params)
                .await
                .map_err(|(code, message)| client_error(path, code, message))?;
            let response: acp::ReadTextFileResponse =
                serde_json::from_value(answer).map_err(|err| {
                    ToolError::Failed(format!("the editor's answer could not be read: {err}"))
                })?;
            Ok(response.content)
        })
    }

    fn write_text_file<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        if !self.write {
            return self.local.write_text_file(path, content);
        }
        Box::pin(async move {
            let request =
                acp::WriteTextFileRequest::new(self.session_id.clone(), path, content.to_string());
            let params = serde_json::to_value(&request)
                .map_err(|err| ToolError::Failed(format!("cannot encode the request: {err}")))?;
            self.sink
                .call("fs/write_text_file", params)
                .await
                .map_err(|(code, message)| client_error(path, code, message))?;
            Ok(())
        })
    }
}
