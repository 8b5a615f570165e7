//! How an ACP version declares the requests it serves: once, in one table
//! ([`requests!`]), each method's name (the schema's constant), the
//! `[acp] unstable` gate that turns it on, and its params type. The table
//! becomes a typed enum of that version's requests, read from a method
//! name and params (-32601 for a name it does not serve, -32602 naming the
//! field for bad params), which the codec matches exhaustively.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::acp::request::{Decoded, Request};
use crate::transport::{Responder, RpcError};

/// Declares a version's request enum from its table:
/// `Variant(Params) = NAME [if gate];` — `gate` a field of
/// [`crate::config::Unstable`].
macro_rules! requests {
    (
        $(#[$doc:meta])*
        $vis:vis enum $enum:ident {
            $( $variant:ident($params:ty) = $name:expr $(, if $gate:ident)? ; )*
        }
    ) => {
        $(#[$doc])*
        $vis enum $enum {
            $( $variant($params), )*
        }

        impl $enum {
            /// Every method in the table, with its gate (`None`: always served).
            pub const TABLE: &'static [(&'static str, Option<&'static str>)] = &[
                $( ($name, $crate::acp::methods::gate_name(&[$(stringify!($gate))?])), )*
            ];

            /// The request `method` names, its params read, if this
            /// version serves it under `unstable`.
            pub fn read(
                method: &str,
                params: serde_json::Value,
                unstable: &$crate::config::Unstable,
            ) -> Result<Self, $crate::transport::RpcError> {
                let _ = unstable;
                $(
                    if method == $name $(&& unstable.$gate)? {
                        return $crate::acp::methods::parse(method, params).map(Self::$variant);
                    }
                )*
                Err($crate::transport::RpcError::method_not_found(method))
            }
        }
    };
}

pub(crate) use requests;

/// A session request's shared params (new, load, resume, fork), read by
/// the calling codec's own `place`.
macro_rules! read_place {
    ($method:expr, $request:ident) => {
        place(
            $method,
            $request.cwd,
            $request.additional_directories,
            &$request.mcp_servers,
            $request.system_prompt,
            $request.config_options,
        )
    };
}

pub(crate) use read_place;

/// A request its codec read (`read`) made neutral by `neutral`; `None`
/// once the error it earned is answered.
pub fn decode<R>(
    read: Result<R, RpcError>,
    responder: Responder,
    neutral: impl FnOnce(R, Responder) -> Decoded,
) -> Option<Request> {
    let request = match read {
        Ok(request) => request,
        Err(err) => {
            responder.respond(Err(err));
            return None;
        }
    };
    match neutral(request, responder) {
        Ok(request) => Some(request),
        Err(refusal) => {
            refusal.answer();
            None
        }
    }
}

/// The gate's name, when a table entry has one.
pub const fn gate_name(gate: &[&'static str]) -> Option<&'static str> {
    match gate {
        [name] => Some(name),
        _ => None,
    }
}

/// Parse `params` into `T`, naming the offending field on failure.
pub fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() {
        // `initialize` and friends have required fields; let serde name them.
        Value::Object(Default::default())
    } else {
        params
    };
    serde_path_to_error::deserialize(params).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path.is_empty() {
            RpcError::invalid_params(format!("{method}: {inner}"))
        } else {
            RpcError::invalid_params(format!("{method}: field `{path}`: {inner}"))
        }
    })
}

#[cfg(test)]
mod tests;
