//! Which ACP version a connection speaks: chosen once by `initialize`
//! and read by the router (which requests exist) and the client port (how
//! updates and questions are written), which share one [`Protocol`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// An ACP major version this agent speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Version {
    /// ACP v1: what every client gets unless it asks for v2.
    #[default]
    V1,
    /// ACP v2 (the schema's `unstable_protocol_v2`).
    V2,
}

/// The connection's version, shared: v1 until an `initialize` asks for
/// (and is given) v2.
#[derive(Debug, Clone, Default)]
pub struct Protocol(Arc<AtomicU8>);

impl Protocol {
    pub fn new(version: Version) -> Self {
        let protocol = Self::default();
        protocol.set(version);
        protocol
    }

    pub fn get(&self) -> Version {
        match self.0.load(Ordering::Acquire) {
            2 => Version::V2,
            _ => Version::V1,
        }
    }

    pub fn set(&self, version: Version) {
        let value = match version {
            Version::V1 => 1,
            Version::V2 => 2,
        };
        self.0.store(value, Ordering::Release);
    }

    pub fn is_v2(&self) -> bool {
        self.get() == Version::V2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_speaks_v1_until_told_otherwise_and_clones_share_it() {
        let protocol = Protocol::default();
        let seen_by_the_client_port = protocol.clone();
        assert_eq!(protocol.get(), Version::V1);
        protocol.set(Version::V2);
        assert!(seen_by_the_client_port.is_v2());
    }
}
