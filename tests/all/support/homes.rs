//! An agent with a user config directory of its own (`XDG_CONFIG_HOME`), so
//! what it reads or writes there (skills, permission rules) is the test's.

use tempfile::TempDir;

use super::harness::Agent;

/// The agent, and its config home (`crucible/` goes under it).
pub async fn agent_with_config_home(config: &str) -> (Agent, TempDir) {
    let config_home = tempfile::tempdir().unwrap();
    let home = config_home.path().to_str().unwrap().to_string();
    let agent = Agent::spawn_with(config, &[], &[("XDG_CONFIG_HOME", &home)]).await;
    (agent, config_home)
}
