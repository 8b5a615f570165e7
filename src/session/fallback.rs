//! A turn that fell back to another provider leaves the session on it: the
//! provider that failed is likely to fail the next turn too. The change is
//! recorded and the client's selectors follow, as after a manual switch.

use super::SessionActor;
use super::settings::{Notify, SettingChange};
use crate::agent_loop::Switched;
use crate::client::Update;

impl SessionActor {
    pub(super) fn adopt_fallback(&mut self, switched: Switched) {
        let before = self.options();
        for change in [
            SettingChange::Provider(switched.provider),
            SettingChange::Model(switched.model),
        ] {
            if let Err(err) = self.apply(change, Notify::Client) {
                tracing::warn!(session = %self.services.id, %err, "fallback not adopted");
                return;
            }
        }
        let after = self.options();
        if before != after {
            self.send(Update::ConfigOptions(after));
        }
    }
}
