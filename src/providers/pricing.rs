//! What model calls cost, from the user's price table (`[prices.MODEL]`):
//! prices per million tokens, and a session's running total.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::Usage;

/// A model's prices per million tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prompt tokens read from the provider's cache; `input` when unset.
    pub cache: Option<f64>,
    /// Prompt tokens written to the provider's cache; `input` when unset.
    pub cache_write: Option<f64>,
    /// ISO 4217 code ("USD") or another unit ("credits").
    pub currency: String,
}

impl Price {
    /// What one call with `usage` cost.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_prompt_tokens.min(usage.prompt_tokens);
        let written = (usage.cache_written_prompt_tokens).min(usage.prompt_tokens - cached);
        let fresh = usage.prompt_tokens - cached - written;
        let per_token = |price: f64| price / 1_000_000.0;
        fresh as f64 * per_token(self.input)
            + cached as f64 * per_token(self.cache.unwrap_or(self.input))
            + written as f64 * per_token(self.cache_write.unwrap_or(self.input))
            + usage.completion_tokens as f64 * per_token(self.output)
    }
}

/// Prices by model id; a model without an entry has no cost.
pub type PriceTable = BTreeMap<String, Price>;

/// The price of `model`: its exact id, else the id without a `provider/`
/// prefix or `:tag`.
pub fn price_of<'a>(table: &'a PriceTable, model: &str) -> Option<&'a Price> {
    table.get(model).or_else(|| {
        let base = model.rsplit('/').next().unwrap_or(model);
        table.get(base.split(':').next().unwrap_or(base))
    })
}

/// A session's spending so far, shared by its turns.
#[derive(Debug, Clone, Default)]
pub struct Spending(Arc<Mutex<f64>>);

impl Spending {
    /// Add one call's cost; returns the total.
    pub fn add(&self, cost: f64) -> f64 {
        let mut total = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
        *total += cost;
        *total
    }
}

/// The cost meter of one turn: the model's price and the session's total.
#[derive(Debug, Clone)]
pub struct CostMeter {
    pub price: Price,
    pub spending: Spending,
}

impl CostMeter {
    /// The session's total after a call with `usage`, and its currency.
    pub fn charge(&self, usage: &Usage) -> (f64, String) {
        (
            self.spending.add(self.price.cost(usage)),
            self.price.currency.clone(),
        )
    }

    /// The session's total so far, and its currency.
    pub fn so_far(&self) -> (f64, String) {
        (self.spending.add(0.0), self.price.currency.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_prices_fresh_cached_and_output_tokens_apart() {
        let price = Price {
            input: 3.0,
            output: 15.0,
            cache: Some(0.3),
            cache_write: Some(3.75),
            currency: "USD".into(),
        };
        let usage = Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 100_000,
            cached_prompt_tokens: 500_000,
            cache_written_prompt_tokens: 200_000,
        };
        let cost = price.cost(&usage);
        // 300k fresh at 3, 500k read at 0.3, 200k written at 3.75, 100k out at 15.
        assert!((cost - (0.9 + 0.15 + 0.75 + 1.5)).abs() < 1e-9, "{cost}");
        let meter = CostMeter {
            price,
            spending: Spending::default(),
        };
        meter.charge(&usage);
        let (total, currency) = meter.charge(&usage);
        assert!((total - 2.0 * cost).abs() < 1e-9);
        assert_eq!(currency, "USD");
    }

    #[test]
    fn prices_are_found_by_id_or_base_name() {
        let table = PriceTable::from([(
            "gpt-4o".to_string(),
            Price {
                input: 1.0,
                output: 2.0,
                cache: None,
                cache_write: None,
                currency: "USD".into(),
            },
        )]);
        assert!(price_of(&table, "gpt-4o").is_some());
        assert!(price_of(&table, "openai/gpt-4o").is_some());
        assert!(price_of(&table, "gpt-4o-mini").is_none());
    }
}
