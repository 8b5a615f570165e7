//! Who may come in: a bearer token on every request (the WebSocket
//! upgrade too), compared in constant time, and the `Origin` a browser
//! page sends checked against the allowed ones (a page on another site
//! must not drive a local agent: DNS rebinding).

use axum::http::{HeaderMap, StatusCode, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A token's SHA-256: what is kept and compared, never the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    pub fn of(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }

    fn matches(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

/// The token and the origins a server lets in.
#[derive(Debug, Clone)]
pub struct Access {
    token: TokenDigest,
    /// As `config::serve::normalize_origin` writes them.
    origins: Vec<String>,
}

/// Why a request is turned away, with its status and what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NoToken,
    WrongToken,
    Origin,
}

impl Refusal {
    pub fn status(self) -> StatusCode {
        match self {
            Self::NoToken | Self::WrongToken => StatusCode::UNAUTHORIZED,
            Self::Origin => StatusCode::FORBIDDEN,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Self::NoToken => {
                "Unauthorized: send the agent's token as `Authorization: Bearer <token>` (serve prints where it is)"
            }
            Self::WrongToken => {
                "Unauthorized: the bearer token is not this agent's (see CRUCIBLE_AGENT_TOKEN or [serve] token_file)"
            }
            Self::Origin => {
                "Forbidden: this Origin may not use the agent; add it to [serve] allowed_origins if it should"
            }
        }
    }
}

impl Access {
    pub fn new(token: &str, origins: Vec<String>) -> Self {
        Self {
            token: TokenDigest::of(token),
            origins,
        }
    }

    /// The token the request carries, when it is this server's and the
    /// request's origin is allowed.
    pub fn check(&self, headers: &HeaderMap) -> Result<TokenDigest, Refusal> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(crate::config::serve::normalize_origin)
                .is_some_and(|origin| self.origins.contains(&origin));
            if !allowed {
                return Err(Refusal::Origin);
            }
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .ok_or(Refusal::NoToken)?;
        let digest = TokenDigest::of(presented);
        if digest.matches(&self.token) {
            Ok(digest)
        } else {
            Err(Refusal::WrongToken)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_token_and_the_origin_decide_who_comes_in() {
        let access = Access::new("s3cret", vec!["https://app.example.com".into()]);
        let auth = (header::AUTHORIZATION, "Bearer s3cret");
        assert!(access.check(&headers(std::slice::from_ref(&auth))).is_ok());
        assert!(
            access
                .check(&headers(&[(header::AUTHORIZATION, "bearer  s3cret ")]))
                .is_ok()
        );
        assert_eq!(access.check(&headers(&[])), Err(Refusal::NoToken));
        assert_eq!(
            access.check(&headers(&[(header::AUTHORIZATION, "Bearer nope")])),
            Err(Refusal::WrongToken)
        );
        assert_eq!(
            access.check(&headers(&[(header::AUTHORIZATION, "Basic s3cret")])),
            Err(Refusal::NoToken)
        );
        let from = |origin: &str| headers(&[auth.clone(), (header::ORIGIN, origin)]);
        assert!(access.check(&from("https://APP.example.com:443")).is_ok());
        assert_eq!(
            access.check(&from("https://evil.example")),
            Err(Refusal::Origin)
        );
        assert_eq!(access.check(&from("null")), Err(Refusal::Origin));
    }
}
