//! A type of one ACP version read as its twin of the other, through their
//! common JSON: for the many params and answers whose wire shape v2 kept.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::transport::RpcError;

/// `value` as `To`, when their JSON is the same shape.
pub fn convert<From: Serialize, To: DeserializeOwned>(value: &From) -> serde_json::Result<To> {
    serde_json::from_value(serde_json::to_value(value)?)
}

/// [`convert`] for a request's params: a value v2 took that v1 cannot
/// read is the client's, named as the method's.
pub fn params<From: Serialize, To: DeserializeOwned>(
    method: &str,
    value: &From,
) -> Result<To, RpcError> {
    convert(value).map_err(|err| RpcError::invalid_params(format!("{method}: {err}")))
}
