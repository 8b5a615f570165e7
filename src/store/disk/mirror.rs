//! The machinery that declares a disk type beside the agent's type it
//! mirrors, with the conversions both ways, so each disk type is written
//! once.

use std::path::PathBuf;

use serde_json::Value;

/// Declares a disk enum, and `From` both ways between it and the agent's
/// enum with the same variants, whose fields move across as they are. When
/// the agent's enum gains a variant this stops compiling until the disk
/// gets one too; when it renames one, write that enum out by hand (the disk
/// keeps its names).
macro_rules! mirrored_enum {
    (
        $(#[$meta:meta])*
        pub enum $disk:ident = $module:ident::$agent:ident {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident
                $({ $($(#[$field_meta:meta])* $field:ident: $field_type:ty),* $(,)? })?
                $(($item:ident: $item_type:ty))?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub enum $disk {
            $(
                $(#[$variant_meta])*
                $variant $({ $($(#[$field_meta])* $field: $field_type),* })? $(($item_type))?
            ),*
        }

        impl From<$module::$agent> for $disk {
            fn from(value: $module::$agent) -> Self {
                match value {
                    $($module::$agent::$variant $({ $($field),* })? $(($item))?
                        => Self::$variant $({ $($field),* })? $(($item))?,)*
                }
            }
        }

        impl From<$disk> for $module::$agent {
            fn from(value: $disk) -> Self {
                match value {
                    $($disk::$variant $({ $($field),* })? $(($item))?
                        => Self::$variant $({ $($field),* })? $(($item))?,)*
                }
            }
        }

        across_by_from!($disk, $module::$agent);
    };
}

/// Declares a disk struct, and `From` both ways between it and the agent's
/// struct with the same fields, each crossing with [`Across`].
macro_rules! mirrored_struct {
    (
        $(#[$meta:meta])*
        pub struct $disk:ident = $module:ident::$agent:ident {
            $($(#[$field_meta:meta])* $field:ident: $field_type:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $disk {
            $($(#[$field_meta])* pub $field: $field_type),*
        }

        impl From<$module::$agent> for $disk {
            fn from(value: $module::$agent) -> Self {
                Self { $($field: value.$field.across()),* }
            }
        }

        impl From<$disk> for $module::$agent {
            fn from(value: $disk) -> Self {
                Self { $($field: value.$field.across()),* }
            }
        }

        across_by_from!($disk, $module::$agent);
    };
}

/// How a struct field crosses between the agent's type and the disk's: as
/// it is, by `From` for a mirrored type, item by item for a list.
pub trait Across<T> {
    fn across(self) -> T;
}

macro_rules! across_by_from {
    ($disk:ty, $agent:ty) => {
        impl Across<$disk> for $agent {
            fn across(self) -> $disk {
                self.into()
            }
        }

        impl Across<$agent> for $disk {
            fn across(self) -> $agent {
                self.into()
            }
        }
    };
}

macro_rules! across_as_it_is {
    ($($type:ty),*) => {
        $(impl Across<$type> for $type {
            fn across(self) -> $type {
                self
            }
        })*
    };
}

across_as_it_is!(
    String,
    PathBuf,
    Value,
    Option<u32>,
    Option<Value>,
    Option<String>,
    Option<u64>,
    Option<f64>,
    f64,
    u32,
    u64,
    bool
);

impl<T: Across<U>, U> Across<Vec<U>> for Vec<T> {
    fn across(self) -> Vec<U> {
        self.into_iter().map(Across::across).collect()
    }
}
