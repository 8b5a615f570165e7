//! `[agent] repeated_call_limit`: how many identical tool calls in a row
//! stop a turn (the loop guard in `agent_loop` applies it).

use thiserror::Error;

/// Identical calls in a row that stop a turn when the config does not say.
pub const DEFAULT_REPEATED_CALL_LIMIT: u32 = 3;

/// `[agent] repeated_call_limit`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopGuardSettings {
    /// The identical call that stops the turn (the 3rd by default); None: off.
    pub limit: Option<u32>,
}

impl Default for LoopGuardSettings {
    fn default() -> Self {
        Self {
            limit: Some(DEFAULT_REPEATED_CALL_LIMIT),
        }
    }
}

/// Why `[agent] repeated_call_limit` cannot be used (the config names the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LoopGuardError {
    #[error("is 1, which would stop every tool call")]
    StopsEveryCall,
}

impl LoopGuardSettings {
    /// The setting as written: 0 turns the guard off; 1 would stop every
    /// call, so it is refused with the fix.
    pub fn from_written(written: Option<u32>) -> Result<Self, LoopGuardError> {
        match written {
            None => Ok(Self::default()),
            Some(0) => Ok(Self { limit: None }),
            Some(1) => Err(LoopGuardError::StopsEveryCall),
            Some(limit) => Ok(Self { limit: Some(limit) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_off_at_zero_and_refuses_one() {
        assert_eq!(
            LoopGuardSettings::from_written(None).unwrap().limit,
            Some(3)
        );
        assert_eq!(
            LoopGuardSettings::from_written(Some(0)).unwrap().limit,
            None
        );
        assert_eq!(
            LoopGuardSettings::from_written(Some(5)).unwrap().limit,
            Some(5)
        );
        assert!(LoopGuardSettings::from_written(Some(1)).is_err());
    }
}
