//! `setup`: an interactive set-up in a terminal (the terminal sign-in
//! method an editor offers). It finds the local model servers already
//! running (Ollama, llama-server, LM Studio on their usual ports, and any
//! `--endpoint`), lists their models, or asks for a hosted provider's key
//! (typed hidden), then writes the config and `secrets.toml` ([`write`]).
//! It refuses when stdin is not a terminal: there is nobody to ask.

pub mod probe;
pub mod write;

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;

use super::CliError;
use crate::providers::settings::{ProviderType, Secret};
use probe::{Candidate, Flavor, Found};
use write::Choice;

/// Wrong answers in a row before setup gives up.
const TRIES: usize = 5;

/// The hosted providers offered, in this order.
const HOSTED: [(&str, ProviderType); 3] = [
    ("OpenAI", ProviderType::OpenAi),
    ("Anthropic", ProviderType::Anthropic),
    ("OpenRouter", ProviderType::OpenRouter),
];

/// Where setup talks to the user: lines in, text out, and a line typed
/// without echo for keys.
pub trait Terminal {
    fn say(&mut self, text: &str) -> io::Result<()>;
    /// The line typed after `prompt`, without its newline; None when the
    /// input ended.
    fn ask(&mut self, prompt: &str) -> io::Result<Option<String>>;
    /// The same, not shown as it is typed.
    fn ask_hidden(&mut self, prompt: &str) -> io::Result<Option<String>>;
}

/// Reads an environment variable.
pub type Env = Box<dyn Fn(&str) -> Option<String>>;

/// What setup works with.
pub struct Setup {
    pub config: PathBuf,
    pub secrets: PathBuf,
    /// Where to look for local servers.
    pub candidates: Vec<Candidate>,
    /// The environment, for keys already exported.
    pub env: Env,
}

impl Setup {
    /// For the config at `config`: the usual ports, then `endpoints`.
    pub fn new(config: PathBuf, endpoints: &[String]) -> Self {
        let mut candidates = probe::usual();
        for endpoint in endpoints {
            candidates.extend(probe::named(endpoint));
        }
        Self {
            secrets: crate::config::secrets_file(&config),
            config,
            candidates,
            env: Box::new(|name| std::env::var(name).ok().filter(|v| !v.is_empty())),
        }
    }
}

/// `crucible-agent setup` from a shell: refuses without a terminal.
pub fn run_in_terminal(setup: Setup) -> Result<bool, CliError> {
    if !io::stdin().is_terminal() {
        return Err(CliError::Refused(
            "setup asks questions, so it needs a terminal, and stdin is not one. Run `crucible-agent setup` in a terminal, or write the config yourself (`crucible-agent config init`, then edit it)".into(),
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| CliError::Refused(format!("cannot start the async runtime: {err}")))?;
    let mut terminal = StdTerminal;
    runtime.block_on(run(&setup, &mut terminal))
}

/// The whole conversation; `Ok(true)` when it ended well (written, or
/// nothing to write because the user said no).
pub async fn run(setup: &Setup, term: &mut dyn Terminal) -> Result<bool, CliError> {
    term.say(&format!(
        "crucible-agent setup: choose the model sessions start with.\nConfig: {}\n\nLooking for model servers running here…\n",
        setup.config.display()
    ))?;
    let found = probe::find(&setup.candidates).await;
    let Some(choice) = choose(setup, term, &found)? else {
        return Ok(true);
    };
    let mut plan = format!(
        "\nsetup will write:\n  {}: sessions start with provider `{}`, model `{}` ({})\n",
        setup.config.display(),
        choice.name,
        choice.model,
        choice.endpoint
    );
    if choice.key.is_some() {
        plan.push_str(&format!(
            "  {}: the key, as [providers.{}] (readable by you only)\n",
            setup.secrets.display(),
            choice.name
        ));
    }
    term.say(&plan)?;
    let yes = ask(term, "Write it? [Y/n]: ")?;
    if !(yes.is_empty() || yes.eq_ignore_ascii_case("y") || yes.eq_ignore_ascii_case("yes")) {
        term.say("Nothing was written.\n")?;
        return Ok(true);
    }
    let written = write::apply(&setup.config, &setup.secrets, &choice)?;
    let mut done = format!("Wrote {}.\n", written.config.display());
    if let Some(secrets) = &written.secrets {
        done.push_str(&format!("Kept the key in {}.\n", secrets.display()));
    }
    done.push_str(
        "Editors start sessions with it from now on; `crucible-agent doctor` checks it.\n",
    );
    term.say(&done)?;
    Ok(true)
}

/// The provider and model; None when there is nothing to choose.
fn choose(
    setup: &Setup,
    term: &mut dyn Terminal,
    found: &[Found],
) -> Result<Option<Choice>, CliError> {
    let mut menu = String::new();
    if found.is_empty() {
        menu.push_str("No local model server answered (Ollama on :11434, llama-server on :8080, LM Studio on :1234; `--endpoint URL` looks elsewhere).\n");
    } else {
        menu.push_str("Local servers found:\n");
        for (n, server) in found.iter().enumerate() {
            let count = match server.models.len() {
                1 => "1 model".to_string(),
                n => format!("{n} models"),
            };
            menu.push_str(&format!(
                "  {}. {} at {} ({count})\n",
                n + 1,
                server.candidate.label,
                server.candidate.endpoint
            ));
        }
    }
    menu.push_str("Hosted (needs an API key):\n");
    for (n, (label, _)) in HOSTED.iter().enumerate() {
        menu.push_str(&format!("  {}. {label}\n", found.len() + n + 1));
    }
    term.say(&menu)?;
    let picked = pick(term, "Provider", found.len() + HOSTED.len())?;
    match found.get(picked) {
        Some(server) => local_choice(term, server).map(Some),
        None => {
            let (label, service) = HOSTED[picked - found.len()];
            hosted_choice(setup, term, label, service).map(Some)
        }
    }
}

fn local_choice(term: &mut dyn Terminal, server: &Found) -> Result<Choice, CliError> {
    let candidate = &server.candidate;
    let model = if server.models.is_empty() {
        let hint = match candidate.flavor {
            Flavor::Ollama => " (`ollama pull llama3.2` fetches one)",
            Flavor::OpenAi => "",
        };
        term.say(&format!("{} lists no model yet{hint}.\n", candidate.label))?;
        ask_nonempty(term, "Model name: ")?
    } else {
        let mut list = format!("Models at {}:\n", candidate.label);
        for (n, model) in server.models.iter().enumerate() {
            list.push_str(&format!("  {}. {model}\n", n + 1));
        }
        term.say(&list)?;
        pick_model(term, &server.models)?
    };
    Ok(Choice {
        name: candidate.name.clone(),
        kind: match candidate.flavor {
            Flavor::Ollama => "ollama",
            Flavor::OpenAi => "openai",
        },
        endpoint: candidate.endpoint.clone(),
        model,
        key: None,
    })
}

fn hosted_choice(
    setup: &Setup,
    term: &mut dyn Terminal,
    label: &str,
    service: ProviderType,
) -> Result<Choice, CliError> {
    let name = service.as_str().to_string();
    let variable = service.key_variable();
    let exported = variable.filter(|var| (setup.env)(var).is_some());
    let prompt = match exported {
        Some(var) => format!("{label} API key (not shown as you type; Enter uses ${var}): "),
        None => format!("{label} API key (not shown as you type): "),
    };
    let mut key = None;
    for _ in 0..TRIES {
        let typed = term
            .ask_hidden(&prompt)
            .map_err(|err| {
                CliError::Refused(format!("cannot read the key from the terminal: {err}"))
            })?
            .ok_or_else(ended)?
            .trim()
            .to_string();
        if typed.is_empty() && exported.is_some() {
            break;
        }
        if typed.is_empty() {
            term.say("A key is needed for a hosted provider.\n")?;
        } else if typed.chars().any(char::is_whitespace) {
            // Not echoed either: the message only says what is wrong.
            term.say("That has spaces in it; a key has none. Paste it again.\n")?;
        } else {
            key = Some(Secret::new(typed));
            break;
        }
    }
    if key.is_none() && exported.is_none() {
        return Err(CliError::Refused(
            "no key was given, so nothing was written".into(),
        ));
    }
    let default = service.default_model().unwrap_or_default();
    let typed = ask(term, &format!("Model [Enter for {default}]: "))?;
    let model = if typed.is_empty() {
        default.to_string()
    } else {
        typed
    };
    Ok(Choice {
        name,
        kind: service.as_str(),
        endpoint: service.default_endpoint().unwrap_or_default().to_string(),
        model,
        key,
    })
}

/// A number from 1 to `count` (Enter: 1), as an index.
fn pick(term: &mut dyn Terminal, what: &str, count: usize) -> Result<usize, CliError> {
    for _ in 0..TRIES {
        let answer = ask(term, &format!("{what} [1-{count}, Enter for 1]: "))?;
        if answer.is_empty() {
            return Ok(0);
        }
        match answer.parse::<usize>() {
            Ok(n) if (1..=count).contains(&n) => return Ok(n - 1),
            _ => term.say(&format!("Type a number from 1 to {count}.\n"))?,
        }
    }
    Err(CliError::Refused(
        "no valid choice was made, so nothing was written".into(),
    ))
}

/// A listed model by number (Enter: the first), or any name typed.
fn pick_model(term: &mut dyn Terminal, models: &[String]) -> Result<String, CliError> {
    let answer = ask(
        term,
        &format!("Model [1-{}, or a name; Enter for 1]: ", models.len()),
    )?;
    if answer.is_empty() {
        return Ok(models[0].clone());
    }
    match answer.parse::<usize>() {
        Ok(n) if (1..=models.len()).contains(&n) => Ok(models[n - 1].clone()),
        _ => Ok(answer),
    }
}

/// A trimmed line; the end of input stops setup.
fn ask(term: &mut dyn Terminal, prompt: &str) -> Result<String, CliError> {
    Ok(term.ask(prompt)?.ok_or_else(ended)?.trim().to_string())
}

fn ask_nonempty(term: &mut dyn Terminal, prompt: &str) -> Result<String, CliError> {
    for _ in 0..TRIES {
        let answer = ask(term, prompt)?;
        if !answer.is_empty() {
            return Ok(answer);
        }
    }
    Err(CliError::Refused(
        "no model was named, so nothing was written".into(),
    ))
}

fn ended() -> CliError {
    CliError::Refused("the input ended before setup was done; nothing was written".into())
}

/// The process's terminal: stdout, stdin, and the tty itself for keys.
struct StdTerminal;

impl Terminal for StdTerminal {
    fn say(&mut self, text: &str) -> io::Result<()> {
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    }

    fn ask(&mut self, prompt: &str) -> io::Result<Option<String>> {
        self.say(prompt)?;
        let mut line = String::new();
        if io::stdin().lock().read_line(&mut line)? == 0 {
            return Ok(None);
        }
        Ok(Some(line.trim_end_matches(['\r', '\n']).to_string()))
    }

    fn ask_hidden(&mut self, prompt: &str) -> io::Result<Option<String>> {
        self.say(prompt)?;
        let typed = rpassword::read_password()?;
        // The Enter typed was not echoed either.
        self.say("\n")?;
        Ok(Some(typed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Answers in order; records what was shown and which answers were hidden.
    #[derive(Default)]
    struct Scripted {
        answers: VecDeque<&'static str>,
        shown: String,
    }

    impl Terminal for Scripted {
        fn say(&mut self, text: &str) -> io::Result<()> {
            self.shown.push_str(text);
            Ok(())
        }
        fn ask(&mut self, prompt: &str) -> io::Result<Option<String>> {
            self.shown.push_str(prompt);
            let answer = self.answers.pop_front();
            // What a terminal echoes.
            if let Some(answer) = answer {
                self.shown.push_str(answer);
                self.shown.push('\n');
            }
            Ok(answer.map(str::to_string))
        }
        fn ask_hidden(&mut self, prompt: &str) -> io::Result<Option<String>> {
            self.shown.push_str(prompt);
            self.shown.push('\n');
            Ok(self.answers.pop_front().map(str::to_string))
        }
    }

    fn setup_in(dir: &std::path::Path, candidates: Vec<Candidate>) -> Setup {
        Setup {
            config: dir.join("config.toml"),
            secrets: dir.join("secrets.toml"),
            candidates,
            env: Box::new(|_| None),
        }
    }

    async fn openai_server(models: &'static str) -> String {
        use axum::routing::get;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let routes = axum::Router::new().route("/v1/models", get(move || async move { models }));
        tokio::spawn(async move {
            let _ = axum::serve(listener, routes).await;
        });
        format!("http://{address}/v1")
    }

    #[tokio::test]
    async fn a_found_server_and_a_model_picked_by_number_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let url = openai_server(r#"{"data":[{"id":"b-model"},{"id":"a-model"}]}"#).await;
        let setup = setup_in(dir.path(), probe::named(&url));
        let mut term = Scripted {
            // A wrong number first, then the server, the second model, yes.
            answers: ["9", "1", "2", ""].into(),
            ..Default::default()
        };
        assert!(run(&setup, &mut term).await.unwrap());
        assert!(
            term.shown.contains("1. OpenAI-compatible server at"),
            "{}",
            term.shown
        );
        assert!(
            term.shown.contains("Type a number from 1 to 4."),
            "{}",
            term.shown
        );
        assert!(term.shown.contains("  2. b-model\n"), "{}", term.shown);
        let config = crate::config::Config::load(
            &setup.config,
            crate::config::ChosenBy::User,
            &crate::config::Overrides::default(),
        )
        .unwrap();
        let provider = config.default_provider().unwrap();
        assert_eq!(provider.name, "local");
        assert_eq!(provider.default_model, "b-model");
        assert_eq!(provider.endpoint, url);
        assert!(!setup.secrets.exists());
    }

    #[tokio::test]
    async fn a_hosted_key_is_asked_hidden_stored_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let setup = setup_in(dir.path(), Vec::new());
        let mut term = Scripted {
            // Nothing found: 1 is OpenAI. An empty key, then the key.
            answers: ["1", "", "sk-HIDDEN-KEY", "gpt-4o-mini", "y"].into(),
            ..Default::default()
        };
        assert!(run(&setup, &mut term).await.unwrap());
        assert!(term.shown.contains("No local model server answered"));
        assert!(term.shown.contains("A key is needed"));
        assert!(!term.shown.contains("sk-HIDDEN-KEY"), "{}", term.shown);
        let config = std::fs::read_to_string(&setup.config).unwrap();
        assert!(!config.contains("sk-HIDDEN-KEY"));
        let stored = std::fs::read_to_string(&setup.secrets).unwrap();
        assert!(stored.contains("[providers.openai]") && stored.contains("sk-HIDDEN-KEY"));
        let loaded = crate::config::Config::load(
            &setup.config,
            crate::config::ChosenBy::User,
            &crate::config::Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            loaded.default_provider().unwrap().default_model,
            "gpt-4o-mini"
        );
    }

    #[tokio::test]
    async fn saying_no_or_ending_the_input_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let setup = setup_in(dir.path(), Vec::new());
        let mut no = Scripted {
            answers: ["2", "sk-x", "", "n"].into(),
            ..Default::default()
        };
        assert!(run(&setup, &mut no).await.unwrap());
        assert!(no.shown.ends_with("Nothing was written.\n"), "{}", no.shown);
        let mut ended = Scripted {
            answers: ["3"].into(),
            ..Default::default()
        };
        let err = run(&setup, &mut ended).await.unwrap_err().to_string();
        assert!(err.contains("nothing was written"), "{err}");
        assert!(!setup.config.exists() && !setup.secrets.exists());
    }
}
