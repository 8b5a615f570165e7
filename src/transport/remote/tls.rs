//! TLS for `serve --tls-cert … --tls-key …`: rustls (as reqwest has it),
//! HTTP/2 and HTTP/1.1 offered by ALPN.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;

/// Why the certificate or key cannot be used.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error(
        "cannot read the TLS certificate chain {path}: {detail}; give a PEM file with the server's certificate first"
    )]
    Certificate { path: String, detail: String },
    #[error(
        "cannot read the TLS private key {path}: {detail}; give the PEM private key of the certificate"
    )]
    Key { path: String, detail: String },
    #[error("the TLS certificate and key do not go together: {0}")]
    Mismatch(String),
}

/// A TLS acceptor for the PEM certificate chain at `cert` and key at `key`.
pub fn acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
    let certificate_error = |detail: String| TlsError::Certificate {
        path: cert.display().to_string(),
        detail,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|err| certificate_error(err.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| certificate_error(err.to_string()))?;
    if chain.is_empty() {
        return Err(certificate_error("it holds no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|err| TlsError::Key {
        path: key.display().to_string(),
        detail: err.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| TlsError::Mismatch(err.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|err| TlsError::Mismatch(err.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
