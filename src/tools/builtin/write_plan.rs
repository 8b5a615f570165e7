//! `write_plan`: the plan the model proposes in plan mode, as Markdown,
//! kept by the session ([`crate::tools::PlanKeeper`]: a file in its own store directory,
//! not the project) and shown in the editor as a plan of its own (ACP
//! `plan_update` with `markdown` and the file's `path`). Offered in
//! read-only modes only, where nothing else can be written.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::events::{PlanDocument, ToolContent, ToolKind};
use crate::tools::{PlanChange, PlanError, ToolContext, ToolError, ToolOutput, TypedTool};

pub const NAME: &str = "write_plan";

/// The longest plan kept: it is read into the editor whole, and a plan
/// longer than this is no longer a plan.
pub const MAX_PLAN_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, Default)]
pub struct WritePlanTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The whole plan in Markdown (it replaces the previous one); empty removes the plan
    markdown: String,
}

impl TypedTool for WritePlanTool {
    type Args = Args;
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Record the plan you propose, in Markdown, where the user sees it and can open it as a file: \
         the goal, numbered steps with the files each touches, risks and open questions, and how the result will be tested. \
         Each call replaces the whole plan; write it again when it changes. Changes nothing in the project.";
    const BRIEF: Option<&'static str> = Some("Record your plan (Markdown), shown to the user.");
    const KIND: ToolKind = ToolKind::Think;
    const MUTATES: bool = false;

    fn title_for(&self, args: &Args) -> String {
        if args.markdown.trim().is_empty() {
            "Remove the plan".into()
        } else {
            "Write the plan".into()
        }
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let keeper = ctx.plan.as_ref().map(Arc::clone).ok_or_else(|| {
            ToolError::Failed(
                "this session cannot keep a plan; give the plan in your answer instead".into(),
            )
        })?;
        let failed = |why: PlanError| ToolError::Failed(format!("the plan was not saved: {why}"));
        if args.markdown.trim().is_empty() {
            keeper.remove().await.map_err(failed)?;
            let mut output =
                ToolOutput::text("The plan is removed.").with_raw_output(json!({"removed": true}));
            output.plan = Some(PlanChange::Document(None));
            return Ok(output);
        }
        let markdown = args.markdown;
        if markdown.len() > MAX_PLAN_BYTES {
            return Err(ToolError::InvalidArguments(format!(
                "the plan is {} bytes, more than the {MAX_PLAN_BYTES} a plan may be; shorten it to the steps, files, risks and tests",
                markdown.len()
            )));
        }
        let path = keeper.save(markdown.clone()).await.map_err(failed)?;
        let lines = markdown.lines().count();
        let for_model = match &path {
            Some(path) => format!(
                "The plan is saved ({lines} lines, in {}) and shown to the user.",
                path.display()
            ),
            None => format!("The plan is recorded ({lines} lines) and shown to the user."),
        };
        let output = ToolOutput {
            for_model,
            // Clients that take no plans read it in the call itself.
            content: vec![ToolContent::Text(markdown.clone())],
            raw_output: json!({"path": path, "lines": lines}),
            locations: Vec::new(),
            plan: Some(PlanChange::Document(Some(PlanDocument { markdown, path }))),
        };
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::PlanKeeper;
    use crate::tools::test_support::*;
    use futures::future::BoxFuture;
    use std::path::PathBuf;
    use std::sync::Mutex;

    /// A keeper in memory that says where it would have written.
    #[derive(Default)]
    struct Kept(Mutex<Option<String>>);

    impl PlanKeeper for Kept {
        fn save(&self, markdown: String) -> BoxFuture<'_, Result<Option<PathBuf>, PlanError>> {
            *self.0.lock().unwrap() = Some(markdown);
            Box::pin(async { Ok(Some(PathBuf::from("/data/sessions/s/plan.md"))) })
        }

        fn remove(&self) -> BoxFuture<'_, Result<(), PlanError>> {
            *self.0.lock().unwrap() = None;
            Box::pin(async { Ok(()) })
        }
    }

    struct Broken;

    impl PlanKeeper for Broken {
        fn save(&self, _: String) -> BoxFuture<'_, Result<Option<PathBuf>, PlanError>> {
            Box::pin(async { Err(PlanError::Store("the disk is full".into())) })
        }

        fn remove(&self) -> BoxFuture<'_, Result<(), PlanError>> {
            Box::pin(async { Err(PlanError::Store("the disk is full".into())) })
        }
    }

    #[tokio::test]
    async fn the_plan_is_kept_shown_in_the_call_and_given_as_the_new_plan() {
        let mut ws = workspace();
        let kept = Arc::new(Kept::default());
        ws.ctx.plan = Some(kept.clone());
        let markdown = "# Plan\n\n1. Read `src/a.rs`\n2. Fix it\n";
        let out = ws.run(&WritePlanTool, json!({"markdown": markdown})).await;
        assert_eq!(kept.0.lock().unwrap().as_deref(), Some(markdown));
        assert_eq!(
            out.for_model,
            "The plan is saved (4 lines, in /data/sessions/s/plan.md) and shown to the user."
        );
        assert_eq!(out.content, vec![ToolContent::Text(markdown.into())]);
        assert_eq!(
            out.plan,
            Some(PlanChange::Document(Some(PlanDocument {
                markdown: markdown.into(),
                path: Some(PathBuf::from("/data/sessions/s/plan.md")),
            })))
        );
        let removed = ws.run(&WritePlanTool, json!({"markdown": "  \n"})).await;
        assert_eq!(removed.plan, Some(PlanChange::Document(None)));
        assert_eq!(*kept.0.lock().unwrap(), None);
    }

    #[tokio::test]
    async fn a_plan_that_cannot_be_kept_is_an_error_the_model_can_act_on() {
        let mut ws = workspace();
        let err = ws
            .fail(&WritePlanTool, json!({"markdown": "# Plan"}))
            .await
            .to_string();
        assert_contains(&err, "give the plan in your answer");
        ws.ctx.plan = Some(Arc::new(Kept::default()));
        let long = "x".repeat(MAX_PLAN_BYTES + 1);
        let err = ws
            .fail(&WritePlanTool, json!({"markdown": long}))
            .await
            .to_string();
        assert_contains(&err, "shorten it");
        ws.ctx.plan = Some(Arc::new(Broken));
        let err = ws
            .fail(&WritePlanTool, json!({"markdown": "# Plan"}))
            .await
            .to_string();
        assert_contains(&err, "the plan was not saved: the disk is full");
    }
}
