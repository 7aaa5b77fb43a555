//! The artifact's versioned encoding: header, body, and the strippable span sidecar.

use serde::{Deserialize, Serialize};

use super::signature::{decode_detail, TYPE_TOO_DEEP};
use super::*;
use crate::isa::{DecodeFault, Op, ISA_HASH};

#[derive(Serialize, Deserialize)]
struct WireFunction {
    name: String,
    params: Vec<String>,
    nregs: u16,
    code: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct WireProgram {
    functions: Vec<WireFunction>,
    constants: Vec<Constant>,
    atoms: Vec<String>,
    entry: u16,
    debug: Option<DebugInfo>,
    signature: Option<Signature>,
}

/// Most bytes of an artifact's manifest section (a manifest lists each atom call site once: far
/// less than the code it describes).
pub const MAX_MANIFEST_BYTES: usize = 16 * 1024 * 1024;

impl Program {
    /// Serializes the program: header (magic, format version, cost version, instruction-set
    /// fingerprint), then the body, then an empty manifest section.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_with_manifest(None)
    }

    /// [`Program::to_bytes`] with `manifest` (the program's manifest, as `ajs_vm::manifest`
    /// writes it) in the manifest section: a loader recomputes it and refuses an artifact
    /// whose manifest differs.
    pub fn to_bytes_with_manifest(&self, manifest: Option<&[u8]>) -> Vec<u8> {
        let wire = WireProgram {
            functions: self
                .functions
                .iter()
                .map(|f| {
                    let mut code = Vec::with_capacity(f.code.len() * 5);
                    for op in &f.code {
                        op.encode(&mut code);
                    }
                    WireFunction {
                        name: f.name.to_string(),
                        params: f.params.iter().map(|p| p.to_string()).collect(),
                        nregs: f.nregs,
                        code,
                    }
                })
                .collect(),
            constants: self.constants.clone(),
            atoms: self.atoms.clone(),
            entry: self.entry,
            debug: self.debug.clone(),
            signature: self.signature.clone(),
        };
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&COST_VERSION.to_le_bytes());
        out.extend_from_slice(&ISA_HASH.to_le_bytes());
        // Serializing plain owned data to a Vec cannot fail.
        if let Ok(body) = postcard::to_stdvec(&wire) {
            out.extend_from_slice(&body);
        }
        if let Ok(section) = postcard::to_stdvec(&manifest) {
            out.extend_from_slice(&section);
        }
        out
    }

    /// Decodes an artifact and verifies it. Its manifest section is not checked here (this
    /// crate cannot compute a manifest): `ajs::load_artifact` loads through
    /// [`Program::from_bytes_and_manifest`] and checks it.
    ///
    /// # Errors
    /// [`LoadError`] naming what is wrong and where; nothing from a refused artifact ever runs.
    pub fn from_bytes(bytes: &[u8]) -> Result<VerifiedProgram, LoadError> {
        Program::from_bytes_and_manifest(bytes).map(|(p, _)| p)
    }

    /// [`Program::from_bytes`], with the artifact's manifest section as it is written (`None`
    /// when it has none: written by [`Program::to_bytes`], or of format version 1).
    ///
    /// # Errors
    /// As [`Program::from_bytes`]; a manifest section over [`MAX_MANIFEST_BYTES`] is malformed.
    pub fn from_bytes_and_manifest(
        bytes: &[u8],
    ) -> Result<(VerifiedProgram, Option<Vec<u8>>), LoadError> {
        const HEADER: usize = 4 + 2 + 2 + 8;
        if bytes.len() > MAX_ARTIFACT_BYTES {
            return Err(LoadError::TooLarge(bytes.len()));
        }
        if bytes.len() < 4 || bytes[..4] != MAGIC {
            return Err(if bytes.len() < 4 {
                LoadError::Truncated(bytes.len())
            } else {
                LoadError::BadMagic
            });
        }
        if bytes.len() < HEADER {
            return Err(LoadError::Truncated(bytes.len()));
        }
        let format = u16::from_le_bytes([bytes[4], bytes[5]]);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&format) {
            return Err(LoadError::FormatVersion {
                found: format,
                expected: FORMAT_VERSION,
            });
        }
        let cost = u16::from_le_bytes([bytes[6], bytes[7]]);
        if cost != COST_VERSION {
            return Err(LoadError::CostVersion {
                found: cost,
                expected: COST_VERSION,
            });
        }
        let mut h = [0u8; 8];
        h.copy_from_slice(&bytes[8..16]);
        let isa = u64::from_le_bytes(h);
        if isa != ISA_HASH {
            return Err(LoadError::IsaMismatch {
                found: isa,
                expected: ISA_HASH,
            });
        }
        TYPE_TOO_DEEP.with(|c| c.set(false));
        let (wire, rest): (WireProgram, &[u8]) = postcard::take_from_bytes(&bytes[HEADER..])
            .map_err(|e| LoadError::Malformed {
                offset: HEADER,
                detail: decode_detail(e),
            })?;
        // version 2 on: the manifest section
        let (manifest, rest) = if format >= 2 {
            let at = bytes.len() - rest.len();
            let (m, rest): (Option<Vec<u8>>, &[u8]) =
                postcard::take_from_bytes(rest).map_err(|e| LoadError::Malformed {
                    offset: at,
                    detail: format!("manifest section: {e}"),
                })?;
            if m.as_ref().is_some_and(|m| m.len() > MAX_MANIFEST_BYTES) {
                return Err(LoadError::Malformed {
                    offset: at,
                    detail: format!(
                        "a manifest over {MAX_MANIFEST_BYTES} bytes (MAX_MANIFEST_BYTES)"
                    ),
                });
            }
            (m, rest)
        } else {
            (None, rest)
        };
        if !rest.is_empty() {
            return Err(LoadError::Malformed {
                offset: bytes.len() - rest.len(),
                detail: format!("{} trailing bytes", rest.len()),
            });
        }
        let mut functions = Vec::with_capacity(wire.functions.len());
        for (fi, wf) in wire.functions.into_iter().enumerate() {
            let mut code = Vec::new();
            let mut at = 0;
            while at < wf.code.len() {
                if code.len() >= MAX_CODE_LEN {
                    return Err(LoadError::Program(format!(
                        "function {fi} has more than {MAX_CODE_LEN} instructions"
                    )));
                }
                match Op::decode(&wf.code[at..]) {
                    Ok((op, len)) => {
                        code.push(op);
                        at += len;
                    }
                    Err(f) => {
                        let fault = match f {
                            DecodeFault::UnknownOpcode(b) => CodeFault::UnknownOpcode(b),
                            DecodeFault::Truncated => CodeFault::Truncated,
                        };
                        return Err(LoadError::Code {
                            func: fi,
                            pc: code.len(),
                            offset: at,
                            fault,
                        });
                    }
                }
            }
            functions.push(Function {
                name: wf.name.into(),
                params: wf.params.into_iter().map(CompactString::from).collect(),
                nregs: wf.nregs,
                code,
            });
        }
        let p = Program {
            functions,
            constants: wire.constants,
            atoms: wire.atoms,
            entry: wire.entry,
            debug: wire.debug,
            signature: wire.signature,
        };
        Ok((p.verify()?, manifest))
    }

    /// Removes the span table (for deployment); error positions are then unknown.
    pub fn strip(&mut self) {
        self.debug = None;
    }

    /// Serializes the program without its span table, and the span table (if any) as a sidecar
    /// bound to those exact artifact bytes: `SPANS_MAGIC`, format version, the artifact's
    /// [`artifact_fingerprint`], then the table.
    pub fn to_stripped_bytes(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        self.to_stripped_bytes_with_manifest(|_| None)
    }

    /// [`Program::to_stripped_bytes`] with the manifest `manifest` gives of the stripped
    /// program in the artifact's manifest section.
    pub fn to_stripped_bytes_with_manifest(
        &self,
        manifest: impl FnOnce(&Program) -> Option<Vec<u8>>,
    ) -> (Vec<u8>, Option<Vec<u8>>) {
        let mut stripped = self.clone();
        let debug = stripped.debug.take();
        let m = manifest(&stripped);
        let artifact = stripped.to_bytes_with_manifest(m.as_deref());
        let sidecar = debug.map(|d| {
            let mut out = Vec::new();
            out.extend_from_slice(&SPANS_MAGIC);
            out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
            out.extend_from_slice(&artifact_fingerprint(&artifact).to_le_bytes());
            if let Ok(body) = postcard::to_stdvec(&d) {
                out.extend_from_slice(&body);
            }
            out
        });
        (artifact, sidecar)
    }

    /// Loads a stripped artifact together with its span sidecar (see
    /// [`Program::to_stripped_bytes`]): the artifact is verified as by [`Program::from_bytes`],
    /// then the sidecar must name this artifact's fingerprint and match its code exactly.
    ///
    /// # Errors
    /// [`LoadError`]; [`LoadError::Spans`] when the sidecar is malformed or belongs elsewhere.
    pub fn from_bytes_with_spans(
        artifact: &[u8],
        sidecar: &[u8],
    ) -> Result<VerifiedProgram, LoadError> {
        const HEADER: usize = 4 + 2 + 8;
        let program = Program::from_bytes(artifact)?;
        if sidecar.len() > MAX_ARTIFACT_BYTES {
            return Err(LoadError::Spans(format!(
                "the sidecar is {} bytes, over the {MAX_ARTIFACT_BYTES}-byte limit (MAX_ARTIFACT_BYTES)",
                sidecar.len()
            )));
        }
        if sidecar.len() < HEADER || sidecar[..4] != SPANS_MAGIC {
            return Err(LoadError::Spans("not a span sidecar (bad magic)".into()));
        }
        let format = u16::from_le_bytes([sidecar[4], sidecar[5]]);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&format) {
            return Err(LoadError::Spans(format!(
                "format version {format} is not supported (this build reads version {FORMAT_VERSION})"
            )));
        }
        let mut h = [0u8; 8];
        h.copy_from_slice(&sidecar[6..14]);
        let found = u64::from_le_bytes(h);
        let expected = artifact_fingerprint(artifact);
        if found != expected {
            return Err(LoadError::Spans(format!(
                "it belongs to artifact {found:016x}, not this one ({expected:016x})"
            )));
        }
        let debug: DebugInfo = postcard::from_bytes(&sidecar[HEADER..])
            .map_err(|e| LoadError::Spans(format!("malformed table: {e}")))?;
        if program.debug.is_some() {
            return Err(LoadError::Spans(
                "the artifact already carries a span table".into(),
            ));
        }
        let mut p = program.program().clone();
        p.debug = Some(debug);
        p.verify()
    }
}
