//! The manifest: what a verified program may call, where, how often, and at what cost, computed
//! from its bytecode alone (so a source and its artifact give the same one).
//!
//! One concern per module: [`cfg`] (blocks, loops, calls, recursion), [`urls`] (what literal
//! text reaches an atom's input), [`atoms`] (call sites and counts), [`taint`] (which atoms'
//! data can reach the result or another atom), [`fuel`] (the sound static fuel bound).
//! docs/manifest.md says what each field means and how the bounds are computed.

use std::collections::BTreeMap;

use ajs_bytecode::{Program, TypeSpec};
use serde::{Deserialize, Serialize};

pub mod atoms;
pub mod cfg;
pub mod fuel;
pub mod taint;
pub mod urls;

#[cfg(test)]
mod tests;

pub use fuel::Caps;

/// Version of the manifest's rules: bumped whenever what it says of a program changes, so an
/// artifact embedding a manifest of other rules is refused at load ("recompile it").
pub const MANIFEST_VERSION: u32 = 2;

/// Everything the manifest says of one program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The rules it was computed by ([`MANIFEST_VERSION`]).
    pub version: u32,
    /// The entry's parameters and the types their examples imply (empty for a snippet).
    pub params: Vec<Param>,
    /// Per atom name (host operations the program calls), its sites and counts.
    pub atoms: BTreeMap<String, AtomUse>,
    /// The fuel one run can spend.
    pub fuel: FuelBound,
    /// The helpers that can call themselves (each function of a call-graph cycle).
    pub recursion: Vec<String>,
    /// Which atoms' data can reach the result, and which atoms' inputs.
    pub output: Output,
}

/// One entry parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Whether a run must pass it.
    pub required: bool,
    /// Its type as its example implies (`string`, `number`, `array of number`, `any value`).
    #[serde(rename = "type")]
    pub ty: String,
}

/// What the program does with one atom.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AtomUse {
    /// Every place the program calls it.
    pub sites: Vec<Site>,
    /// The most calls one run can make: `None` (`null`) when a site is inside a loop, a
    /// callback over a collection or recursion (unbounded).
    pub max_calls: Option<u64>,
}

/// One call site of an atom.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Site {
    /// Source line (from 1), when the program carries spans.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u32>,
    /// Source column (from 0, UTF-16 units), when the program carries spans.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub column: Option<u32>,
    /// The function it is in.
    pub function: String,
    /// Whether it runs inside a loop (its own function's, or a caller's around the call).
    pub in_loop: bool,
    /// Whether it runs inside a callback over a collection (`map`, `filter`, …).
    pub in_callback: bool,
    /// For `httpFetch`: the URL when it is literal, or its literal start.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub url: Option<UrlInfo>,
    /// For `httpFetch`: the method when it is literal.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub method: Option<String>,
    /// For `llmPredict`: whether the call asks for a response format (`null`: not known).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub response_format: Option<bool>,
}

/// A URL known before the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlInfo {
    /// The URL (`exact`), or the text every URL of this site starts with.
    pub url: String,
    /// Whether this is the whole URL.
    pub exact: bool,
}

/// The fuel bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FuelBound {
    /// A sound upper bound on one run's fuel (in fuel, rounded up), at the caps in force and
    /// the default atom prices; `None` (`null`) when a loop, recursion or callback's trip count
    /// depends on data, or a native's work is set by a number not known before the run.
    pub max: Option<u64>,
    /// The part of `max` that no data size changes: instructions, calls, atom prices (the
    /// worst path's), in fuel rounded up; `None` with `max`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fixed: Option<u64>,
    /// Where the loops (and callbacks over collections) are, when `max` is `null`.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub loops: Vec<Place>,
    /// Why else `max` is `null`: recursion, or natives whose work a run-time number sets.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unbounded: Vec<String>,
}

/// A place in the program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Place {
    /// The function.
    pub function: String,
    /// Source line, when spans are present.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u32>,
    /// Source column, when spans are present.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub column: Option<u32>,
    /// Whether it is a callback over a collection rather than a loop statement.
    pub callback: bool,
}

/// Where atoms' data can go.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// Per atom the program calls: whether data from it can reach the run's result.
    pub result: BTreeMap<String, bool>,
    /// Each atom whose data can reach another atom's input (`httpFetch` → `llmPredict`: fetched
    /// text can flow into a prompt).
    pub flows: Vec<Flow>,
}

/// Data from one atom can reach another's input.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Flow {
    /// The atom whose result.
    pub from: String,
    /// The atom whose input.
    pub to: String,
}

impl Manifest {
    /// The manifest of `program` at the default caps ([`Caps::default`]).
    pub fn of(program: &Program) -> Manifest {
        Manifest::with_caps(program, &Caps::default())
    }

    /// The manifest of `program` with its fuel bound at `caps`.
    pub fn with_caps(program: &Program, caps: &Caps) -> Manifest {
        let graph = cfg::Graph::of(program);
        let values = urls::Values::of(program, &graph);
        let atoms = atoms::uses(program, &graph, &values);
        let fuel = fuel::bound(program, &graph, caps);
        let output = taint::output(program, &graph);
        Manifest {
            version: MANIFEST_VERSION,
            params: params(program),
            atoms,
            fuel,
            recursion: graph.recursive_names(program),
            output,
        }
    }

    /// The manifest as pretty JSON (what `ajs inspect` prints).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The manifest's canonical bytes (compact JSON), as an artifact embeds them.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The `httpFetch` sites whose literal URL or URL prefix has a known host, with it.
    pub fn fetch_sites(&self) -> impl Iterator<Item = (&Site, &UrlInfo)> {
        self.atoms
            .get("httpFetch")
            .into_iter()
            .flat_map(|a| a.sites.iter())
            .filter_map(|s| s.url.as_ref().map(|u| (s, u)))
    }
}

impl Site {
    /// Where it is, for messages: `line 3, column 12` (or its function without spans).
    pub fn place(&self) -> String {
        match (self.line, self.column) {
            (Some(l), Some(c)) => format!("line {l}, column {c}"),
            _ => format!("function '{}'", self.function),
        }
    }
}

fn params(program: &Program) -> Vec<Param> {
    let Some(sig) = &program.signature else {
        return Vec::new();
    };
    sig.params
        .iter()
        .map(|p| Param {
            name: p.name.to_string(),
            required: p.required,
            ty: type_name(&p.ty),
        })
        .collect()
}

/// A type as the manifest writes it.
fn type_name(t: &TypeSpec) -> String {
    match t {
        TypeSpec::Any => "any".into(),
        TypeSpec::String => "string".into(),
        TypeSpec::Number => "number".into(),
        TypeSpec::Boolean => "boolean".into(),
        TypeSpec::Null => "null".into(),
        TypeSpec::Array(t) => format!("array of {}", type_name(t)),
        TypeSpec::Object(props) => {
            let inner: Vec<String> = props
                .iter()
                .map(|(k, t)| format!("{k}: {}", type_name(t)))
                .collect();
            format!("{{ {} }}", inner.join(", "))
        }
    }
}
