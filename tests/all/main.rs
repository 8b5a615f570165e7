//! The integration tests, as one binary (`all`): one module per topic beside
//! this file, sharing the harness in `support/` (compiled once). Most drive the
//! built `crucible-agent` binary over its pipes against a real local HTTP
//! server; `providers`, `mcp` and the real-model suites use the library.
//!
//! Run one topic with `cargo test --test all cancel::`. The ignored tests need
//! real servers and run under `make e2e` (`scripts/e2e.sh`): `real_llm` and
//! `context_real_llm` (llama-server), and `mcp`'s (the npm MCP servers).
//!
//! They speak POSIX `sh` to the agent's tools, so they build on Unix only;
//! on Windows the smoke (`scripts/windows-smoke.sh`) drives the `.exe`.
#![cfg(unix)]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test that cannot unwrap has failed: the panic is its report"
)]

mod support;

mod architecture;
mod bad_params;
mod bounds;
mod budgets;

mod acp_fields;
mod acp_v1_20;
mod backpressure;
mod batches;

mod cancel;
mod cli;
mod commands;
mod context;
mod context_real_llm;
mod crash_consistency;
mod crucible_client;
mod crucible_config;
mod crucible_permissions;
mod cursors;
mod day_to_day;
mod dialects;
mod disk_full;
mod docs;
mod elicitation;
mod faults;
mod fuzz;
mod live_updates;
mod loop_guard;
mod markdown_plans;
mod mcp;
mod mcp_faults;
mod mcp_over_acp;
mod mcp_prompts;
mod mcp_sessions;
mod prompt_cache;
mod prompt_suggestions;
mod prompted_tools;
mod prompts;
mod protocol;
mod protocol_v2;
mod protocol_v2_surface;
mod provider_errors;
mod provider_types;
mod providers;
mod rate_limits;
mod real_llm;
mod reasoning;
mod remote;
mod rewind;
// Landlock's; macOS's Seatbelt has unit tests of its profile only.
#[cfg(target_os = "linux")]
mod sandbox;
mod secrets;
mod server_slots;
mod sessions;
mod setup;
mod skills;
mod sticky_permissions;
mod store_fixture;
mod streaming;
mod subagent_limits;
mod subagent_sessions;
mod subagents;
mod todo_plans;
mod tools;
mod unstable;
mod unstable_providers;
mod workspace_roots;
