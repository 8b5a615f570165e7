//! Local model servers already running: each candidate's model list is
//! asked for with a short timeout (Ollama's `/api/tags`, the OpenAI
//! `/models` that llama-server and LM Studio serve); those that answer
//! are offered with their models.

use std::time::Duration;

use serde::Deserialize;

/// How long a server may take to list its models: it runs here, or not at all.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);

/// Which API a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `GET {root}/api/tags`; the config's `type = "ollama"`, endpoint the root.
    Ollama,
    /// `GET {base}/models`; `type = "openai"`, endpoint the `/v1` base.
    OpenAi,
}

/// A place a server may be running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What the user is shown: "Ollama", "llama-server"…
    pub label: String,
    /// The provider's name in the config.
    pub name: String,
    pub flavor: Flavor,
    /// The config's `endpoint`: Ollama's root, or the OpenAI `/v1` base.
    pub endpoint: String,
}

impl Candidate {
    fn new(label: &str, name: &str, flavor: Flavor, endpoint: &str) -> Self {
        Self {
            label: label.into(),
            name: name.into(),
            flavor,
            endpoint: endpoint.into(),
        }
    }

    fn models_url(&self) -> String {
        match self.flavor {
            Flavor::Ollama => format!("{}/api/tags", self.endpoint),
            Flavor::OpenAi => format!("{}/models", self.endpoint),
        }
    }
}

/// The usual ports: Ollama's 11434, llama-server's 8080, LM Studio's 1234.
pub fn usual() -> Vec<Candidate> {
    vec![
        Candidate::new("Ollama", "ollama", Flavor::Ollama, "http://127.0.0.1:11434"),
        Candidate::new(
            "llama-server",
            "llama-server",
            Flavor::OpenAi,
            "http://127.0.0.1:8080/v1",
        ),
        Candidate::new(
            "LM Studio",
            "lmstudio",
            Flavor::OpenAi,
            "http://127.0.0.1:1234/v1",
        ),
    ]
}

/// A server the user names (`--endpoint`): Ollama at its root, else an
/// OpenAI-compatible server at its `/v1` base, whichever answers.
pub fn named(url: &str) -> Vec<Candidate> {
    let url = url.trim().trim_end_matches('/');
    let (root, base) = match url.strip_suffix("/v1") {
        Some(root) => (root.to_string(), url.to_string()),
        None => (url.to_string(), format!("{url}/v1")),
    };
    vec![
        Candidate::new("Ollama", "local", Flavor::Ollama, &root),
        Candidate::new("OpenAI-compatible server", "local", Flavor::OpenAi, &base),
    ]
}

/// A server that answered, with the models it lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub candidate: Candidate,
    pub models: Vec<String>,
}

/// Every candidate that answers, in the order given; of candidates at one
/// address (one server speaking both APIs), the first that answers.
pub async fn find(candidates: &[Candidate]) -> Vec<Found> {
    let client = match reqwest::Client::builder()
        .timeout(PROBE_TIMEOUT)
        .connect_timeout(PROBE_TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(err) => {
            tracing::warn!(%err, "cannot build an HTTP client to look for local servers");
            return Vec::new();
        }
    };
    let answers =
        futures::future::join_all(candidates.iter().map(|c| list_models(&client, c))).await;
    let mut found: Vec<Found> = Vec::new();
    for (candidate, models) in candidates.iter().zip(answers) {
        let Some(models) = models else { continue };
        let host = host_of(&candidate.endpoint);
        if found.iter().any(|f| host_of(&f.candidate.endpoint) == host) {
            continue;
        }
        found.push(Found {
            candidate: candidate.clone(),
            models,
        });
    }
    found
}

/// `scheme://host:port` of an endpoint.
fn host_of(endpoint: &str) -> &str {
    let after_scheme = endpoint.find("://").map_or(0, |at| at + 3);
    match endpoint[after_scheme..].find('/') {
        Some(slash) => &endpoint[..after_scheme + slash],
        None => endpoint,
    }
}

/// The models a candidate lists, or None when it does not answer as its
/// API should.
async fn list_models(client: &reqwest::Client, candidate: &Candidate) -> Option<Vec<String>> {
    let response = client.get(candidate.models_url()).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let body = response.bytes().await.ok()?;
    let mut models = parse_models(candidate.flavor, &body)?;
    models.sort();
    models.dedup();
    Some(models)
}

/// The model names in a model-list answer.
fn parse_models(flavor: Flavor, body: &[u8]) -> Option<Vec<String>> {
    #[derive(Deserialize)]
    struct Tags {
        models: Vec<Tag>,
    }
    #[derive(Deserialize)]
    struct Tag {
        name: String,
    }
    #[derive(Deserialize)]
    struct Listing {
        data: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        id: String,
    }
    match flavor {
        Flavor::Ollama => serde_json::from_slice::<Tags>(body)
            .ok()
            .map(|tags| tags.models.into_iter().map(|t| t.name).collect()),
        Flavor::OpenAi => serde_json::from_slice::<Listing>(body)
            .ok()
            .map(|listing| listing.data.into_iter().map(|e| e.id).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::routing::get;

    /// A server on a free port answering `path` with `body`; its root URL.
    async fn serve(routes: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, routes).await;
        });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn servers_that_answer_are_found_with_their_models() {
        let ollama = serve(Router::new().route(
            "/api/tags",
            get(|| async { r#"{"models":[{"name":"qwen3:4b"},{"name":"llama3.2:latest"}]}"# }),
        ))
        .await;
        let openai = serve(Router::new().route(
            "/v1/models",
            get(|| async {
                r#"{"object":"list","data":[{"id":"smollm2-135m","object":"model"}]}"#
            }),
        ))
        .await;
        // Speaks neither API: a web page where the model list should be.
        let other =
            serve(Router::new().route("/v1/models", get(|| async { "<html></html>" }))).await;
        // Nothing listens there any more.
        let gone = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", listener.local_addr().unwrap())
        };
        let mut candidates = named(&ollama);
        candidates.extend(named(&format!("{openai}/v1/")));
        candidates.extend(named(&other));
        candidates.extend(named(&gone));
        let found = find(&candidates).await;
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].candidate.flavor, Flavor::Ollama);
        assert_eq!(found[0].candidate.endpoint, ollama);
        assert_eq!(found[0].models, ["llama3.2:latest", "qwen3:4b"]);
        assert_eq!(found[1].candidate.flavor, Flavor::OpenAi);
        assert_eq!(found[1].candidate.endpoint, format!("{openai}/v1"));
        assert_eq!(found[1].models, ["smollm2-135m"]);
    }

    #[test]
    fn the_usual_ports_and_a_named_endpoint() {
        let usual = usual();
        let ports: Vec<&str> = usual.iter().map(|c| host_of(&c.endpoint)).collect();
        assert_eq!(
            ports,
            [
                "http://127.0.0.1:11434",
                "http://127.0.0.1:8080",
                "http://127.0.0.1:1234"
            ]
        );
        let named = named("http://gpu:8000/v1");
        assert_eq!(named[0].endpoint, "http://gpu:8000");
        assert_eq!(named[1].endpoint, "http://gpu:8000/v1");
        assert_eq!(named[1].models_url(), "http://gpu:8000/v1/models");
    }
}
