//! Skills as slash commands: `/NAME args` runs a turn with the skill's
//! instructions loaded and the arguments as the request. The set is read
//! again at each turn's start; a change is advertised to the client.

use super::SessionActor;
use super::prompts::Advertise;
use crate::client::CommandInfo;
use crate::model::Part;

impl SessionActor {
    /// A command per skill whose name no other command has.
    pub(super) fn skill_commands(&self, taken: &[CommandInfo]) -> Vec<CommandInfo> {
        self.services
            .skills
            .skills()
            .into_iter()
            .filter(|skill| !taken.iter().any(|c| c.name == skill.name))
            .map(|skill| CommandInfo {
                name: skill.name,
                description: format!("Skill: {}", skill.description),
                hint: Some("what to do".into()),
            })
            .collect()
    }

    /// Re-read the skill folders if they changed, and tell the client.
    pub(super) fn refresh_skills(&mut self) {
        if self.services.skills.refresh() {
            self.advertise_commands(Advertise::Changed);
        }
    }

    /// `/NAME args` for a skill: its instructions, then the request; any
    /// other prompt as it is.
    pub(super) fn expand_skill_command(&self, content: Vec<Part>) -> Vec<Part> {
        let [Part::Text { text }] = content.as_slice() else {
            return content;
        };
        let Some(rest) = text.trim_start().strip_prefix('/') else {
            return content;
        };
        let (name, args) = rest
            .split_once(char::is_whitespace)
            .map_or((rest, ""), |(name, args)| (name, args.trim()));
        let advertised = self.commands();
        let is_skill = self
            .skill_commands(&[])
            .iter()
            .any(|c| c.name == name && advertised.contains(c));
        let Some(skill) = self.services.skills.find(name).filter(|_| is_skill) else {
            return content;
        };
        let request = if args.is_empty() {
            "Apply the skill to the task at hand.".to_string()
        } else {
            args.to_string()
        };
        vec![Part::Text {
            text: format!(
                "Use the skill `{}` (its folder: {}; read its other files with the `skill` tool):\n\n<skill name=\"{}\">\n{}\n</skill>\n\n{request}",
                skill.name,
                skill.dir.display(),
                skill.name,
                skill.instructions
            ),
        }]
    }
}
