//! `[prices.MODEL]`: what a model's tokens cost, per million, so sessions
//! can report their spending. Without an entry a model has no cost.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::error::{ConfigError, invalid};
use crate::providers::pricing::{Price, PriceTable};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    /// Per million prompt tokens.
    pub input: Option<f64>,
    /// Per million answer tokens.
    pub output: Option<f64>,
    /// Per million prompt tokens read from the provider's cache.
    pub cache: Option<f64>,
    /// Per million prompt tokens written to the provider's cache.
    pub cache_write: Option<f64>,
    /// "USD" when unset.
    pub currency: Option<String>,
}

pub(super) fn validate_prices(
    raw: BTreeMap<String, RawPrice>,
    path: &Path,
) -> Result<PriceTable, ConfigError> {
    raw.into_iter()
        .map(|(model, price)| {
            let key = |field: &str| format!("prices.\"{model}\".{field}");
            let amount = |field: &str, value: Option<f64>| match value {
                Some(value) if !(value.is_finite() && value >= 0.0) => Err(invalid(
                    path,
                    key(field),
                    format!("is {value}"),
                    "Give the price per million tokens as a number of 0 or more.",
                )),
                value => Ok(value),
            };
            let (Some(input), Some(output)) = (
                amount("input", price.input)?,
                amount("output", price.output)?,
            ) else {
                return Err(invalid(
                    path,
                    key("input"),
                    "needs both `input` and `output`",
                    "Give the prices per million prompt and answer tokens, e.g. input = 3.0, output = 15.0.",
                ));
            };
            let price = Price {
                input,
                output,
                cache: amount("cache", price.cache)?,
                cache_write: amount("cache_write", price.cache_write)?,
                currency: price.currency.unwrap_or_else(|| "USD".into()),
            };
            Ok((model, price))
        })
        .collect()
}
