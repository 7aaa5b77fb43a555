//! Compile-time warnings (decision 39): an atom call whose input object is written out names
//! an input the atom does not declare (decision 29: it is ignored, so a typo would otherwise
//! pass in silence).
//!
//! The lowering reports each atom call it compiles to [`atom_call`]; the declared inputs and
//! the warnings found live in this thread's sink while [`collect`] runs, so the lowering's
//! types need no new field.

use std::cell::RefCell;
use std::collections::HashMap;

use oxc_ast::ast::{Expression, ObjectPropertyKind, PropertyKey};
use oxc_span::GetSpan;

/// The inputs each atom declares, for the compile-time check. An atom not listed (or listed
/// with no inputs) accepts anything and is not checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AtomInputs {
    inputs: HashMap<String, Vec<String>>,
    nested: HashMap<(String, String), Vec<String>>,
}

impl AtomInputs {
    /// Declares the inputs of `atom`.
    pub fn declare(&mut self, atom: &str, inputs: &[&str]) {
        self.inputs.insert(
            atom.to_string(),
            inputs.iter().map(|s| s.to_string()).collect(),
        );
    }

    /// Declares the members of the object input `input` of `atom` (`llmPredict`'s
    /// `options`), checked the same way, named as options.
    pub fn declare_nested(&mut self, atom: &str, input: &str, members: &[&str]) {
        self.nested.insert(
            (atom.to_string(), input.to_string()),
            members.iter().map(|s| s.to_string()).collect(),
        );
    }
}

/// A warning, positioned in the user's source; shown as `warning: … at <source>:LINE:COL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// What was noticed (and what happens).
    pub message: String,
    /// The source name.
    pub source_name: String,
    /// Line, 1-based.
    pub line: u32,
    /// Column, 0-based, in UTF-16 units.
    pub column: u32,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "warning: {} at {}:{}:{}",
            self.message, self.source_name, self.line, self.column
        )
    }
}

struct Sink {
    inputs: AtomInputs,
    found: Vec<(u32, String)>,
}

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Runs `f` with `inputs` as this thread's sink; returns its result and the warnings found
/// (byte offset, message), in source order, each once.
pub(crate) fn collect<T>(inputs: &AtomInputs, f: impl FnOnce() -> T) -> (T, Vec<(u32, String)>) {
    let previous = SINK.with(|s| {
        s.borrow_mut().replace(Sink {
            inputs: inputs.clone(),
            found: Vec::new(),
        })
    });
    let r = f();
    let mut found = SINK
        .with(|s| std::mem::replace(&mut *s.borrow_mut(), previous))
        .map(|s| s.found)
        .unwrap_or_default();
    found.sort();
    found.dedup();
    (r, found)
}

/// Most characters of a key quoted in a warning.
const MAX_KEY_CHARS: usize = 64;

/// A key as quoted in a warning: at most [`MAX_KEY_CHARS`] characters.
fn quoted(key: &str) -> std::borrow::Cow<'_, str> {
    match key.char_indices().nth(MAX_KEY_CHARS) {
        Some((i, _)) => format!("{}…", &key[..i]).into(),
        None => key.into(),
    }
}

/// The message for an input `atom` does not declare (the run-time warning says the same).
pub fn unknown_input(atom: &str, key: &str, known: &[String]) -> String {
    let key = quoted(key);
    format!(
        "{atom}: input '{key}' is not known and is ignored (inputs: {})",
        known.join(", ")
    )
}

/// The message for a member of `atom`'s object input `input` it does not read.
pub fn unknown_member(atom: &str, input: &str, key: &str, known: &[String]) -> String {
    let key = quoted(key);
    format!(
        "{atom}: {input} member '{key}' is not known and is ignored (known: {})",
        known.join(", ")
    )
}

/// The static keys of an object literal, with their offsets (spread and computed keys are not
/// known until the run).
fn keys<'a>(e: &'a Expression<'a>) -> Vec<(&'a str, u32, Option<&'a Expression<'a>>)> {
    let Expression::ObjectExpression(o) = e.without_parentheses() else {
        return Vec::new();
    };
    o.properties
        .iter()
        .filter_map(|p| match p {
            ObjectPropertyKind::ObjectProperty(p) if !p.computed => {
                let name = match &p.key {
                    PropertyKey::StaticIdentifier(id) => id.name.as_str(),
                    PropertyKey::StringLiteral(s) => s.value.as_str(),
                    _ => return None,
                };
                Some((name, p.key.span().start, Some(&p.value)))
            }
            _ => None,
        })
        .collect()
}

/// Checks a call of `atom` whose argument is `arg` (the lowering calls this for every atom
/// call it compiles).
pub(crate) fn atom_call(atom: &str, arg: Option<&Expression>) {
    let Some(arg) = arg else { return };
    SINK.with(|s| {
        let mut s = s.borrow_mut();
        let Some(sink) = s.as_mut() else { return };
        let Some(known) = sink.inputs.inputs.get(atom).filter(|k| !k.is_empty()) else {
            return;
        };
        let mut found = Vec::new();
        for (key, at, value) in keys(arg) {
            if !known.iter().any(|k| k == key) {
                found.push((at, unknown_input(atom, key, known)));
                continue;
            }
            let Some(members) = sink.inputs.nested.get(&(atom.to_string(), key.to_string())) else {
                continue;
            };
            for (m, at, _) in value.map(keys).unwrap_or_default() {
                if !members.iter().any(|k| k == m) {
                    found.push((at, unknown_member(atom, key, m, members)));
                }
            }
        }
        sink.found.extend(found);
    });
}

/// Records a warning at source offset `at` (nothing when no sink is set up: the caller asked
/// for no warnings).
pub(crate) fn note(at: u32, message: impl FnOnce() -> String) {
    SINK.with(|s| {
        if let Some(sink) = s.borrow_mut().as_mut() {
            sink.found.push((at, message()));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile_with_warnings, CompileOptions, Mode};

    fn warnings(src: &str) -> Vec<String> {
        let mut inputs = AtomInputs::default();
        inputs.declare("httpFetch", &["url", "headers"]);
        inputs.declare("lookup", &[]);
        inputs.declare_nested("llmPredict", "options", &["maxTokens", "max_tokens"]);
        inputs.declare("llmPredict", &["prompt", "options"]);
        let atoms = [
            "httpFetch".to_string(),
            "llmPredict".to_string(),
            "lookup".to_string(),
        ];
        let opts = CompileOptions {
            mode: Mode::FunctionBody,
            atoms: &atoms,
            ..CompileOptions::default()
        };
        let (_, w) = compile_with_warnings(src, &opts, &inputs).unwrap();
        w.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn written_out_unknown_inputs_are_warned_where_they_are() {
        assert_eq!(
            warnings("return httpFetch({ url: 'u', header: {} })"),
            vec!["warning: httpFetch: input 'header' is not known and is ignored (inputs: url, headers) at <source>:1:29"]
        );
        assert_eq!(
            warnings("return llmPredict({ prompt: 'p', options: { max_token: 5, maxTokens: 1 } })"),
            vec!["warning: llmPredict: options member 'max_token' is not known and is ignored (known: maxTokens, max_tokens) at <source>:1:44"]
        );
        // spread, computed keys, a variable, an atom without declared inputs: nothing to say
        for quiet in [
            "let o = { header: 1 }\nreturn httpFetch(o)",
            "let k = 'header'\nreturn httpFetch({ url: 'u', [k]: 1 })",
            "return lookup({ anything: 1 })",
            "return httpFetch({ url: 'u', headers: {} })",
        ] {
            assert!(warnings(quiet).is_empty(), "{quiet}");
        }
        // each call site once, in source order
        let w = warnings("let a = httpFetch({ url: 'u', x: 1 })\nlet b = httpFetch({ url: 'u', x: 1 })\nreturn a");
        assert_eq!(w.len(), 2);
        assert!(
            w[0].ends_with("at <source>:1:30") && w[1].ends_with("at <source>:2:30"),
            "{w:?}"
        );
    }
}
