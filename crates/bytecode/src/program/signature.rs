//! An agent's signature: its parameters and the types their example values imply.

use std::cell::Cell;

use serde::{Deserialize, Serialize};

use super::CompactString;

/// Most levels of nesting of a [`TypeSpec`] an artifact may hold (as many as the brackets of
/// a source the compiler takes): a loader refuses a deeper one as it reads it, before its
/// recursion could exhaust the stack.
pub const MAX_TYPE_DEPTH: u32 = 256;

/// The type an agent parameter is checked against, inferred from its example value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum TypeSpec {
    /// Anything.
    Any,
    /// A string.
    String,
    /// A number.
    Number,
    /// A boolean.
    Boolean,
    /// `null`.
    Null,
    /// An array whose elements all match.
    Array(Box<TypeSpec>),
    /// An object with (at least) these typed keys.
    Object(Vec<(CompactString, TypeSpec)>),
}

/// [`TypeSpec`] as the wire holds it (the same variants in the same order, so the same
/// encoding): its nested types read through `TypeSpec`'s own `Deserialize`, which counts the
/// depth.
#[derive(Deserialize)]
enum WireTypeSpec {
    Any,
    String,
    Number,
    Boolean,
    Null,
    Array(Box<TypeSpec>),
    Object(Vec<(CompactString, TypeSpec)>),
}

thread_local! {
    /// How many [`TypeSpec`]s the current thread is reading inside one another.
    pub(super) static TYPE_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Whether the current thread's reading refused a type for its depth (the decoder's error
    /// does not carry the message).
    pub(super) static TYPE_TOO_DEEP: Cell<bool> = const { Cell::new(false) };
}

/// The message of a decoding error `e`: the depth limit's when that was why.
pub(super) fn decode_detail(e: postcard::Error) -> String {
    if TYPE_TOO_DEEP.with(|c| c.replace(false)) {
        format!("a parameter type nested deeper than {MAX_TYPE_DEPTH} levels (MAX_TYPE_DEPTH); recompile the program")
    } else {
        e.to_string()
    }
}

impl<'de> Deserialize<'de> for TypeSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let depth = TYPE_DEPTH.with(Cell::get);
        if depth >= MAX_TYPE_DEPTH {
            TYPE_TOO_DEEP.with(|c| c.set(true));
            return Err(serde::de::Error::custom("parameter type nested too deep"));
        }
        TYPE_DEPTH.with(|c| c.set(depth + 1));
        let wire = WireTypeSpec::deserialize(d);
        TYPE_DEPTH.with(|c| c.set(depth));
        Ok(match wire? {
            WireTypeSpec::Any => TypeSpec::Any,
            WireTypeSpec::String => TypeSpec::String,
            WireTypeSpec::Number => TypeSpec::Number,
            WireTypeSpec::Boolean => TypeSpec::Boolean,
            WireTypeSpec::Null => TypeSpec::Null,
            WireTypeSpec::Array(t) => TypeSpec::Array(t),
            WireTypeSpec::Object(props) => TypeSpec::Object(props),
        })
    }
}

impl TypeSpec {
    /// How the type reads in messages (`string`, `array of number`, …).
    pub fn describe(&self) -> String {
        match self {
            TypeSpec::Any => "any value".into(),
            TypeSpec::String => "a string".into(),
            TypeSpec::Number => "a number".into(),
            TypeSpec::Boolean => "a boolean".into(),
            TypeSpec::Null => "null".into(),
            TypeSpec::Array(t) if **t == TypeSpec::Any => "an array".into(),
            TypeSpec::Array(t) => format!(
                "an array of {}",
                t.describe()
                    .trim_start_matches("a ")
                    .trim_start_matches("an ")
            ),
            TypeSpec::Object(_) => "an object".into(),
        }
    }
}

/// One parameter of an agent's entry function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// Its name (the key of the arguments object).
    pub name: CompactString,
    /// Whether the caller must pass it.
    pub required: bool,
    /// The type its example value implies.
    pub ty: TypeSpec,
}

/// The entry function's parameters, for checking a run's arguments before it starts.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Signature {
    /// The entry's name.
    pub name: CompactString,
    /// Its parameters, in order (argument `i` arrives in register `i`).
    pub params: Vec<ParamSpec>,
}
