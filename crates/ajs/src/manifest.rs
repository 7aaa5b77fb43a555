//! The manifest of a program (docs/manifest.md): computed from its bytecode, embedded in the
//! artifacts `ajs compile` writes, and checked when an artifact loads.

use ajs_bytecode::{LoadError, Program, VerifiedProgram};
pub use ajs_vm::manifest::{
    AtomUse, Caps as ManifestCaps, Flow, FuelBound, Manifest, Output, Param, Place, Site, UrlInfo,
    MANIFEST_VERSION,
};

/// `program.manifest()`: what a program may call, where, how often, and at what cost.
pub trait ProgramManifest {
    /// The program's manifest at the default caps (the heap limit, the default atom prices).
    fn manifest(&self) -> Manifest;
}

impl ProgramManifest for Program {
    fn manifest(&self) -> Manifest {
        Manifest::of(self)
    }
}

impl ProgramManifest for VerifiedProgram {
    fn manifest(&self) -> Manifest {
        Manifest::of(self)
    }
}

/// The artifact bytes of `program` with its manifest embedded (what `ajs compile` writes).
pub fn artifact_bytes(program: &Program) -> Vec<u8> {
    program.to_bytes_with_manifest(Some(&Manifest::of(program).to_bytes()))
}

/// [`Program::to_stripped_bytes`] with the stripped program's manifest embedded.
pub fn stripped_artifact_bytes(program: &Program) -> (Vec<u8>, Option<Vec<u8>>) {
    program.to_stripped_bytes_with_manifest(|p| Some(Manifest::of(p).to_bytes()))
}

/// Checks an artifact's embedded manifest against the one its program has.
///
/// # Errors
/// [`LoadError::Manifest`] naming what differs.
pub(crate) fn check(program: &Program, embedded: Option<&[u8]>) -> Result<(), LoadError> {
    let Some(embedded) = embedded else {
        return Ok(());
    };
    let actual = Manifest::of(program);
    if actual.to_bytes() == embedded {
        return Ok(());
    }
    let detail = match serde_json::from_slice::<serde_json::Value>(embedded) {
        Err(_) => "its manifest section is not a manifest".to_string(),
        Ok(written) => {
            let have = serde_json::to_value(&actual).unwrap_or_default();
            let field = ["version", "params", "atoms", "fuel", "recursion", "output"]
                .into_iter()
                .find(|f| written.get(f) != have.get(f));
            match field {
                Some("version") => format!(
                    "it was written by manifest rules version {}, this build's are {MANIFEST_VERSION}",
                    written.get("version").unwrap_or(&serde_json::Value::Null)
                ),
                Some(f) => format!("its '{f}' differs from the program's"),
                None => "it is not written as this build writes it".to_string(),
            }
        }
    };
    Err(LoadError::Manifest(detail))
}
