//! Session requests the ACP-feature modules share: a `session/new` with
//! extra params, and a session reopened by a second agent process.

use serde_json::{Value, json};

use super::harness::Agent;

impl Agent {
    /// `session/new` in the agent's dir with `extra` params beside `cwd`
    /// and `mcpServers`; the whole answer.
    pub async fn new_session_answer(&mut self, extra: Value) -> Value {
        let mut params = json!({"cwd": self.cwd(), "mcpServers": []});
        if let (Value::Object(params), Value::Object(extra)) = (&mut params, extra) {
            params.extend(extra);
        }
        self.call("session/new", params).await.1
    }

    /// This agent's stdin closed and its exit awaited, then a second agent
    /// on the same data dir, initialized, resuming `session` (no extra
    /// params); the new agent and its answer.
    pub async fn resumed_elsewhere(&mut self, config: &str, session: &str) -> (Agent, Value) {
        self.close_stdin();
        self.wait_exit().await;
        let mut again = Agent::spawn_sharing(config, self).await;
        again.initialize().await;
        let (_, resumed) = again
            .call(
                "session/resume",
                json!({"sessionId": session, "cwd": self.cwd(), "mcpServers": []}),
            )
            .await;
        (again, resumed)
    }
}
