//! Crucible's config file, section by section, as its documentation writes
//! it (`docs/Config.toml`, `docs/Help/Config/*.md`,
//! `docs/Help/Configuration.md`), and the design document's shape. The
//! examples are rebuilt here from the documented keys.

use std::path::Path;
use std::time::Duration;

use super::tests::{load, refusal};
use super::{Config, Overrides};
use crate::mcp::McpTransport;
use crate::providers::settings::{KeySource, ProviderKind, ProviderType};

/// `text` as `config.toml` in `dir`, with `vars` as the environment.
fn load_in(dir: &Path, text: &str, vars: &[(&str, &str)]) -> Config {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    Config::from_toml(text, &dir.join("config.toml"), &env, &Overrides::default()).unwrap()
}

fn ignored(config: &Config) -> Vec<&str> {
    config
        .report
        .ignored
        .iter()
        .map(|i| i.key.as_str())
        .collect()
}

#[test]
fn the_design_document_shape_is_used_not_replaced_by_ollama() {
    let text = r#"
[llm]
default_provider = "openai"

[llm.ollama]
url = "http://localhost:11434"
model = "llama3.2"

[llm.openai]
url = "https://api.openai.com/v1"
model = "gpt-4o"

[chat]
default_backend = "internal"
default_agent = "general"
default_acp_agent = "claude-code"
"#;
    let config = load(text, &[("OPENAI_API_KEY", "sk-env")]).unwrap();
    assert_eq!(config.default_provider, "openai");
    let openai = config.default_provider().unwrap();
    assert_eq!(openai.kind, ProviderKind::OpenAi);
    assert_eq!(openai.default_model, "gpt-4o");
    assert_eq!(
        openai.api_key.as_ref().unwrap().source,
        KeySource::EnvVar("OPENAI_API_KEY".into())
    );
    assert_eq!(
        config.providers["ollama"].endpoint,
        "http://localhost:11434"
    );
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert!(config.report.used.contains(&"llm.default_provider".into()));
    assert!(config.report.used.contains(&"llm.openai".into()));
}

#[test]
fn overlapping_shapes_follow_the_documented_order_and_say_which_won() {
    let text = r#"
[chat]
default_provider = "a"
[llm]
default = "b"
default_provider = "c"
[llm.providers.a]
type = "ollama"
default_model = "from-providers"
[llm.a]
model = "from-design"
type = "ollama"
[llm.providers.b]
type = "ollama"
[llm.providers.c]
type = "ollama"
"#;
    let config = load(text, &[]).unwrap();
    assert_eq!(config.default_provider, "a");
    assert_eq!(config.providers["a"].default_model, "from-providers");
    let decisions = config.report.decisions.join("\n");
    assert!(
        decisions.contains("`chat.default_provider` = \"a\" wins over `llm.default` = \"b\""),
        "{decisions}"
    );
    assert!(
        decisions.contains("wins over `llm.default_provider` = \"c\""),
        "{decisions}"
    );
    assert!(
        decisions.contains("[llm.providers.a] wins over [llm.a]"),
        "{decisions}"
    );
    // Crucible alone: [llm] default.
    let config = load(
        "[llm]\ndefault = \"c\"\ndefault_provider = \"b\"\n[llm.providers.b]\n[llm.providers.c]",
        &[],
    )
    .unwrap();
    assert_eq!(config.default_provider, "c");
}

#[test]
fn the_llm_page_examples_load_with_their_parameters() {
    let text = include_str!("../../tests/fixtures/crucible/llm_page.toml");
    let config = load(
        text,
        &[("OPENAI_API_KEY", "sk-o"), ("OPENROUTER_API_KEY", "sk-r")],
    )
    .unwrap();
    let local = config.default_provider().unwrap();
    assert_eq!(local.temperature, Some(0.7));
    assert_eq!(local.max_output_tokens, Some(4096));
    assert_eq!(local.timeout, Duration::from_secs(300));
    assert_eq!(local.available_models, ["llama3.2", "qwen2.5-coder"]);
    let openai = &config.providers["openai"];
    assert_eq!(openai.default_model, "gpt-4o", "Crucible's default model");
    assert_eq!(openai.api_key.as_ref().unwrap().secret.expose(), "sk-o");
    assert_eq!(
        config.providers["claude"].missing_key_variable.as_deref(),
        Some("ANTHROPIC_API_KEY")
    );
    let router = &config.providers["router"];
    assert_eq!(router.service, ProviderType::OpenRouter);
    assert_eq!(router.kind, ProviderKind::OpenAi);
    assert_eq!(router.endpoint, "https://openrouter.ai/api/v1");
    assert_eq!(router.default_model, "openai/gpt-4o");
    let custom = &config.providers["box"];
    assert_eq!(custom.kind, ProviderKind::OpenAi);
    assert_eq!(custom.endpoint, "http://box:8000/v1");
    // `api_key = "OPENAI_API_KEY"` names the variable, as Configuration.md has it.
    let cloud = &config.providers["cloud"];
    assert_eq!(
        cloud.api_key.as_ref().unwrap().source,
        KeySource::EnvVar("OPENAI_API_KEY".into())
    );
    assert_eq!(cloud.max_output_tokens, Some(8192));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn chat_settings_apply_to_the_default_provider_and_win() {
    let text = r#"
[llm]
default = "local"
[llm.providers.local]
type = "ollama"
default_model = "llama3.2"
temperature = 0.7
[llm.providers.other]
type = "ollama"
default_model = "untouched"

[chat]
enable_markdown = true
show_thinking = false
show_diffs = true
agent_preference = "crucible"
model = "qwen2.5-coder"
endpoint = "http://gpu:11434"
temperature = 0.2
max_tokens = 2048
timeout_secs = 60
"#;
    let config = load(text, &[]).unwrap();
    let local = config.default_provider().unwrap();
    assert_eq!(local.default_model, "qwen2.5-coder");
    assert_eq!(local.endpoint, "http://gpu:11434");
    assert_eq!(local.temperature, Some(0.2));
    assert_eq!(local.max_output_tokens, Some(2048));
    assert_eq!(local.timeout, Duration::from_secs(60));
    assert_eq!(config.providers["other"].default_model, "untouched");
    assert!(
        config
            .report
            .decisions
            .iter()
            .any(|d| d.contains("`chat.model` wins over `llm.providers.local.default_model`")),
        "{:?}",
        config.report.decisions
    );
    assert_eq!(
        ignored(&config),
        [
            "chat.agent_preference",
            "chat.enable_markdown",
            "chat.show_diffs",
            "chat.show_thinking"
        ]
    );
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn a_provider_the_agent_cannot_use_is_named_never_silently_replaced() {
    let text = "[llm]\ndefault = \"local\"\n[llm.providers.local]\ntype = \"ollama\"\n[llm.providers.copilot]\ntype = \"github-copilot\"";
    let config = load(text, &[]).unwrap();
    assert!(!config.providers.contains_key("copilot"));
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.contains("llm.providers.copilot.type") && w.contains("left out")),
        "{:?}",
        config.warnings
    );
    let err = refusal("[llm.providers.copilot]\ntype = \"copilot\"");
    assert!(err.contains("no provider crucible-agent can use"), "{err}");
    assert!(err.contains("copilot: GitHub Copilot"), "{err}");
    // A file with no provider at all says it uses the built-in Ollama.
    let config = load(
        "default_kiln = \"notes\"\n[kilns]\nnotes = \"~/notes\"",
        &[],
    )
    .unwrap();
    assert_eq!(config.default_provider, "ollama");
    assert!(
        config.warnings[0].contains("no provider is configured"),
        "{:?}",
        config.warnings
    );
}

#[test]
fn keys_come_from_env_references_files_and_secrets_toml_and_the_environment_wins() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.key"), "sk-from-file\n").unwrap();
    std::fs::write(
        dir.path().join("secrets.toml"),
        "# Managed by `cru auth`.\n[providers.stored]\napi_key = \"sk-stored\"\n[providers.anthropic]\napi_key = \"sk-ant-stored\"\n",
    )
    .unwrap();
    let text = r#"
[llm.providers.work]
type = "openai"
default_model = "gpt-4o"
api_key = "{file:work.key}"

[llm.providers.stored]
type = "openai"
default_model = "gpt-4o"

[llm.providers.claude]
type = "anthropic"
"#;
    let config = load_in(dir.path(), text, &[]);
    let work = &config.providers["work"];
    assert_eq!(
        work.api_key.as_ref().unwrap().secret.expose(),
        "sk-from-file"
    );
    let stored = &config.providers["stored"];
    assert_eq!(
        stored.api_key.as_ref().unwrap().secret.expose(),
        "sk-stored"
    );
    assert_eq!(
        stored.api_key.as_ref().unwrap().source,
        KeySource::File(dir.path().join("secrets.toml"))
    );
    // By type when not by name, as `cru auth login --provider anthropic` stores it.
    let claude = &config.providers["claude"];
    assert_eq!(
        claude.api_key.as_ref().unwrap().secret.expose(),
        "sk-ant-stored"
    );
    // The type's variable wins over a key kept in a file, and says so.
    let config = load_in(dir.path(), text, &[("OPENAI_API_KEY", "sk-env")]);
    let work = &config.providers["work"];
    assert_eq!(work.api_key.as_ref().unwrap().secret.expose(), "sk-env");
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.contains("llm.providers.work.api_key") && w.contains("OPENAI_API_KEY")),
        "{:?}",
        config.warnings
    );
    assert!(!format!("{config:?}").contains("sk-from-file"));
    // At another server (a local llama-server of type openai) the written
    // key stays: the exported OpenAI key is never sent there instead.
    let local = "[llm.providers.local]\ntype = \"openai\"\nendpoint = \"http://127.0.0.1:8080/v1\"\ndefault_model = \"m\"\napi_key = \"sk-local\"\n";
    let config = load_in(dir.path(), local, &[("OPENAI_API_KEY", "sk-env")]);
    let key = config.providers["local"].api_key.as_ref().unwrap();
    assert_eq!(key.secret.expose(), "sk-local");
}

#[test]
fn include_merges_secrets_toml_into_llm() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("keys.toml"),
        "[providers.cloud]\napi_key = \"sk-included\"\n",
    )
    .unwrap();
    let text = "[include]\nllm = \"keys.toml\"\n\n[llm]\ndefault = \"cloud\"\n[llm.providers.cloud]\ntype = \"openai\"\ndefault_model = \"gpt-4o\"\n";
    let config = load_in(dir.path(), text, &[]);
    let key = config.default_provider().unwrap().api_key.clone().unwrap();
    assert_eq!(key.secret.expose(), "sk-included");
    assert_eq!(key.source, KeySource::File(dir.path().join("keys.toml")));
    // Kept in a file of its own: no plaintext warning.
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert!(
        config
            .report
            .used
            .contains(&"llm.providers.cloud.api_key".into())
    );
}

#[test]
fn the_mcp_page_examples_become_prefixed_filtered_servers() {
    let text = r#"
[[mcp.servers]]
name = "github"
prefix = "gh_"
timeout_secs = 60
allowed_tools = ["search_*", "get_*", "list_*"]
blocked_tools = ["delete_*", "*_dangerous"]

[mcp.servers.transport]
type = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[mcp.servers.transport.env]
GITHUB_TOKEN = "{env:GITHUB_TOKEN}"

[[mcp.servers]]
name = "custom"
prefix = "my_"
auto_reconnect = false

[mcp.servers.transport]
type = "stdio"
command = "/usr/local/bin/my-mcp-server"

[[mcp.servers]]
name = "remote"
prefix = "remote_"

[mcp.servers.transport]
type = "sse"
url = "http://localhost:3000/sse"
auth_header = "Bearer your-secret-token"
"#;
    let config = load(text, &[("GITHUB_TOKEN", "ghp-secret")]).unwrap();
    let github = &config.mcp_servers[0];
    assert_eq!(github.name, "github");
    assert_eq!(github.tools.prefix.as_deref(), Some("gh_"));
    assert!(github.tools.offers("search_code"));
    assert!(!github.tools.offers("delete_repo"));
    assert_eq!(github.call_timeout, Some(Duration::from_secs(60)));
    let McpTransport::Stdio { env, args, .. } = &github.transport else {
        panic!("{github:?}")
    };
    assert_eq!(env[0], ("GITHUB_TOKEN".into(), "ghp-secret".into()));
    assert_eq!(args[0], "-y");
    let McpTransport::Sse { headers, .. } = &config.mcp_servers[2].transport else {
        panic!("{:?}", config.mcp_servers[2])
    };
    assert_eq!(headers[0].0, "Authorization");
    assert_eq!(ignored(&config), ["mcp.servers[1].auto_reconnect"]);
    for (text, key) in [
        (
            "[[mcp.servers]]\nname = \"x\"\nprefix = \"gh\"\n[mcp.servers.transport]\ncommand = \"c\"",
            "mcp.servers[0].prefix",
        ),
        ("[[mcp.servers]]\nname = \"x\"", "mcp.servers[0].transport"),
        (
            "[[mcp.servers]]\nname = \"x\"\n[mcp.servers.transport]\ntype = \"ws\"",
            "mcp.servers[0].transport.type",
        ),
        (
            "[[mcp.servers]]\nname = \"x\"\n[mcp.servers.transport]\ncommand = \"{env:NOPE}\"",
            "mcp.servers[0].transport.command",
        ),
    ] {
        let err = refusal(text);
        assert!(err.contains(key), "{text}: {err}");
    }
}

#[test]
fn the_seed_mcp_table_wins_over_a_crucible_entry_of_the_same_name() {
    let text = "[mcp_servers.fs]\ncommand = \"ours\"\n[[mcp.servers]]\nname = \"fs\"\nprefix = \"fs_\"\n[mcp.servers.transport]\ncommand = \"theirs\"";
    let config = load(text, &[]).unwrap();
    assert_eq!(config.mcp_servers.len(), 1);
    assert_eq!(config.mcp_servers[0].target(), "ours");
    assert!(config.report.decisions[0].contains("[mcp_servers.fs] wins"));
}

/// Each section the TUI alone reads, as its documentation shows it: it
/// loads, is reported as ignored with a reason, and warns about nothing.
#[test]
fn every_documented_crucible_section_loads_and_is_reported() {
    let sections: &[(&str, &str)] = &[
        (
            "default_kiln = \"vault\"\n[kilns]\nvault = \"~/vault\"\n[kilns.work]\npath = \"~/work/notes\"\nlazy = true",
            "kilns",
        ),
        (
            "kiln_path = \"/home/user/notes\"\nsession_kiln = \"~/sessions\"\ndata_home = \"~/.crucible\"\nagent_directories = [\"~/shared-agents\"]\nruntimepath = [\"/opt/crucible/runtime\"]",
            "session_kiln",
        ),
        (
            "[projects.crucible]\npath = \"~/crucible\"\nkilns = [\"docs\", \"vault\"]\ndefault_kiln = \"vault\"",
            "projects",
        ),
        (
            "[llm.models]\nreasoning = \"openai/o1\"\ncoder = \"qwen2.5-coder\"",
            "llm.models",
        ),
        (
            "[enrichment.provider]\ntype = \"fastembed\"\nmodel = \"BAAI/bge-small-en-v1.5\"\n[enrichment.pipeline]\nmax_precognition_chars = 3000",
            "enrichment",
        ),
        (
            "[acp]\nstreaming_timeout_minutes = 15\ndefault_agent = \"claude\"\n[acp.agents.claude-proxy]\nextends = \"claude\"\nenv = { ANTHROPIC_BASE_URL = \"http://localhost:4000\" }\n[acp.agents.orchestrator.delegation]\nenabled = true\nmax_depth = 2",
            "acp.streaming_timeout_minutes",
        ),
        (
            "[cli]\nshow_progress = true\nconfirm_destructive = true\nverbose = false\n[cli.highlighting]\nenabled = true\ntheme = \"base16-ocean.dark\"",
            "cli",
        ),
        (
            "[context]\nrules_files = [\"AGENTS.md\", \"CLAUDE.md\", \".rules\", \".cursorrules\"]",
            "context.rules_files",
        ),
        ("[storage]\nidle_timeout_secs = 300", "storage"),
        (
            "[web]\nport = 3000\nhost = \"127.0.0.1\"\napi_key = \"\"\nremote_shell = false\nregistration_roots = []\nallowed_hosts = [\"node7.local\"]",
            "web",
        ),
        (
            "[workspace]\nroot_dir = \"~/Projects\"\ndiscover = false\nsession_scratch_dir = \"~/.crucible/workspaces\"",
            "workspace",
        ),
        ("[server]\nauto_archive_hours = 72", "server"),
        ("[logging]\nlevel = \"info\"", "logging"),
        (
            "[[schedules]]\nname = \"nightly reindex\"\nevery = \"1d\"\naction = \"lua:cru.log('tick')\"\nenabled = true",
            "schedules",
        ),
        ("[plugins.oci]\nruntime = \"podman\"", "plugins"),
    ];
    let provider = "\n[llm.providers.local]\ntype = \"ollama\"\n";
    for (section, key) in sections {
        let config = load(&format!("{section}\n{provider}"), &[]).unwrap_or_else(|err| {
            panic!("{section}: {err}");
        });
        assert!(
            config.warnings.is_empty(),
            "{section}: {:?}",
            config.warnings
        );
        // The kiln (for its agent cards and skills), the specialty map
        // and the rules files are used.
        if ["kilns", "llm.models", "context.rules_files"].contains(key) {
            assert!(config.report.used.contains(&key.to_string()), "{key}");
            continue;
        }
        let reported = config.report.ignored.iter().find(|i| i.key == *key);
        assert!(
            reported.is_some_and(|i| !i.why.is_empty()),
            "{key}: {:?}",
            config.report
        );
    }
}

/// The whole reference file, rebuilt from the documented keys of every
/// section: it starts the agent with the local provider as configured.
#[test]
fn the_reference_config_loads_whole() {
    let text = include_str!("../../tests/fixtures/crucible/reference.toml");
    let config = load(text, &[("GITHUB_TOKEN", "ghp")]).unwrap();
    let local = config.default_provider().unwrap();
    assert_eq!(local.name, "local");
    assert_eq!(local.default_model, "llama3.2");
    assert_eq!(local.temperature, Some(0.7));
    assert_eq!(local.max_output_tokens, Some(4096));
    assert_eq!(config.providers.len(), 3);
    assert_eq!(config.mcp_servers[0].tools.prefix.as_deref(), Some("gh_"));
    assert_eq!(config.permission_lists.allow.len(), 3);
    assert_eq!(config.permission_lists.deny.len(), 1);
    assert!(matches!(
        config.permission_profiles.get("claude"),
        Some(Some(_))
    ));
    // Without its token the GitHub server is left out, named, not fatal.
    let untokened = load(text, &[]).unwrap();
    assert!(untokened.mcp_servers.is_empty());
    assert!(
        untokened
            .warnings
            .iter()
            .any(|w| w.contains("mcp.servers[0].transport.env.GITHUB_TOKEN")
                && w.contains("server `github` is left out")),
        "{:?}",
        untokened.warnings
    );
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let used = &config.report.used;
    for key in [
        "llm.default",
        "llm.providers.local.temperature",
        "mcp.servers[0].prefix",
    ] {
        assert!(used.contains(&key.to_string()), "{key}: {used:?}");
    }
    let ignored = ignored(&config);
    for key in [
        "enrichment",
        "acp.streaming_timeout_minutes",
        "web",
        "chat.show_diffs",
    ] {
        assert!(ignored.contains(&key), "{key}: {ignored:?}");
    }
    assert_eq!(
        config.rules_files.0.as_ref().map(Vec::len),
        Some(4),
        "the reference's rules files are read"
    );
}
