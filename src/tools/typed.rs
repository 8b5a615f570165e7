//! Tools with typed arguments. A [`TypedTool`] declares its argument struct;
//! one implementation of [`Tool`] for all of them derives the JSON Schema the
//! model reads from that struct, parses the model's arguments into it (with
//! the error text the model reads), and salvages what it can of invalid
//! arguments for the call's title and locations.

use std::future::Future;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::events::{Location, ToolKind};

/// A tool whose arguments are a struct. Every `TypedTool` is a [`Tool`].
pub trait TypedTool: Send + Sync {
    /// The arguments. The doc comments on its fields are the descriptions
    /// the model reads; a struct-level doc comment is left out.
    type Args: DeserializeOwned + JsonSchema + Default + Send;
    /// The name the model calls it by (see [`Tool::name`]).
    const NAME: &'static str;
    /// What the model is told the tool does.
    const DESCRIPTION: &'static str;
    /// The one line a model with a small window is told, when the first
    /// sentence of the description is not enough.
    const BRIEF: Option<&'static str> = None;
    const KIND: ToolKind;
    /// Whether the tool changes anything (see [`Tool::mutates`]).
    const MUTATES: bool;

    /// What the model is told, when it depends on the machine; by default
    /// [`Self::DESCRIPTION`].
    fn description_here(&self) -> &str {
        Self::DESCRIPTION
    }

    /// See [`Tool::title`]. The arguments may be salvaged from invalid ones
    /// (see [`salvage`]): a required text may be empty.
    fn title_for(&self, args: &Self::Args) -> String;

    /// See [`Tool::locations`]; salvaged arguments as for the title.
    fn locations_for(&self, _args: &Self::Args, _ctx: &ToolContext) -> Vec<Location> {
        Vec::new()
    }

    /// Runs the call with arguments that parsed.
    fn run(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        self.description_here()
    }

    fn brief(&self) -> Option<&str> {
        T::BRIEF
    }

    fn parameters(&self) -> Value {
        schema_for::<T::Args>()
    }

    fn kind(&self) -> ToolKind {
        T::KIND
    }

    fn mutates(&self) -> bool {
        T::MUTATES
    }

    fn title(&self, arguments: &Value) -> String {
        self.title_for(&salvage(arguments))
    }

    fn locations(&self, arguments: &Value, ctx: &ToolContext) -> Vec<Location> {
        self.locations_for(&salvage(arguments), ctx)
    }

    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = deserialize_arguments(arguments)?;
            self.run(args, ctx).await
        })
    }
}

/// Arguments into a tool's struct; the error names the field at fault.
pub(crate) fn deserialize_arguments<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    // Models sometimes send `null` for "no arguments".
    let arguments = match arguments {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    serde_path_to_error::deserialize(arguments).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            ToolError::InvalidArguments(inner.to_string())
        } else {
            ToolError::InvalidArguments(format!("`{path}`: {inner}"))
        }
    })
}

/// The arguments as far as they are valid, for the title and locations of a
/// call that may yet fail: a missing or invalid required field is blank (an
/// empty text, zero, an empty list), an invalid optional one is absent, and
/// arguments that are no object are none.
fn salvage<A: DeserializeOwned + JsonSchema + Default>(arguments: &Value) -> A {
    if let Ok(args) = A::deserialize(arguments) {
        return args;
    }
    let schema = schema_for::<A>();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let blank = |field: &str| blank_value(&schema["properties"][field]);
    let mut object = arguments.as_object().cloned().unwrap_or_default();
    for field in &required {
        if !object.contains_key(*field) {
            object.insert((*field).to_string(), blank(field));
        }
    }
    // Each round mends the field at fault, so there are at most as many
    // rounds as fields.
    let rounds = object.len() + 1;
    let mut value = Value::Object(object);
    for _ in 0..rounds {
        let err = match serde_path_to_error::deserialize::<_, A>(&value) {
            Ok(args) => return args,
            Err(err) => err,
        };
        let Some(serde_path_to_error::Segment::Map { key }) = err.path().iter().next() else {
            break;
        };
        let Some(object) = value.as_object_mut() else {
            break;
        };
        if required.contains(&key.as_str()) {
            let blank = blank(key);
            if object.get(key) == Some(&blank) {
                break;
            }
            object.insert(key.clone(), blank);
        } else {
            object.remove(key);
        }
    }
    A::default()
}

/// The emptiest value a property's schema allows.
fn blank_value(property: &Value) -> Value {
    match property["type"].as_str() {
        Some("string") => json!(""),
        Some("integer" | "number") => json!(0),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        _ => json!({}),
    }
}

/// The JSON Schema of a tool's arguments as providers take it: an object at
/// the top, every subschema inline (small models stumble over `$ref`), an
/// optional field typed as what it is when given (not also `null`), and
/// none of the generator's meta data (`$schema`, `title`, `format`).
pub(crate) fn schema_for<A: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::draft07();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<A>()
        .to_value();
    simplify(&mut schema);
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
        // The struct's own doc comment is for programmers; the tool's
        // description speaks to the model.
        root.remove("description");
        root.entry("required").or_insert_with(|| json!([]));
    }
    schema
}

/// A subschema as the model should read it: without `format` (`uint32`
/// is schemars' own word, and strict providers refuse formats they do not
/// know) and without the `null` an `Option` field also accepts.
fn simplify(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("format");
    if let Some(Value::Array(types)) = object.get("type") {
        let mut given = types.iter().filter(|kind| *kind != "null");
        if let (Some(kind), None) = (given.next(), given.next()) {
            let kind = kind.clone();
            object.insert("type".into(), kind);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(simplify);
    }
    if let Some(items) = object.get_mut("items") {
        simplify(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize, JsonSchema)]
    struct Args {
        /// Where
        path: String,
        /// How many
        #[schemars(range(min = 1))]
        limit: Option<u32>,
        /// What
        items: Vec<Item>,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize, JsonSchema)]
    struct Item {
        /// The name
        name: String,
    }

    #[test]
    fn argument_errors_name_the_field() {
        let missing = deserialize_arguments::<Args>(json!({})).unwrap_err();
        assert!(
            missing.to_string().contains("missing field `path`"),
            "{missing}"
        );
        let wrong = deserialize_arguments::<Args>(json!({"path": "a", "limit": "x"})).unwrap_err();
        assert!(wrong.to_string().contains("`limit`"), "{wrong}");
    }

    #[test]
    fn schemas_are_inline_objects_without_generator_noise() {
        assert_eq!(
            schema_for::<Args>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where"},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many"},
                    "items": {
                        "type": "array",
                        "description": "What",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string", "description": "The name"}},
                            "required": ["name"]
                        }
                    }
                },
                "required": ["path", "items"]
            })
        );
    }

    #[test]
    fn salvage_keeps_what_is_valid() {
        let valid = json!({"path": "a", "limit": 3, "items": [{"name": "x"}]});
        assert_eq!(
            salvage::<Args>(&valid),
            Args {
                path: "a".into(),
                limit: Some(3),
                items: vec![Item { name: "x".into() }],
            }
        );
        let partial = json!({"path": "a", "limit": "ten", "items": [{"name": 5}]});
        assert_eq!(
            salvage::<Args>(&partial),
            Args {
                path: "a".into(),
                ..Args::default()
            }
        );
        assert_eq!(
            salvage::<Args>(&json!({"path": 7, "limit": 2})),
            Args {
                limit: Some(2),
                ..Args::default()
            }
        );
        assert_eq!(salvage::<Args>(&json!("garbage")), Args::default());
        assert_eq!(salvage::<Args>(&Value::Null), Args::default());
    }
}
