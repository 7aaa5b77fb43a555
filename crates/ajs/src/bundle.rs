//! A suspended run as one file: the artifact, the approval policies, the settings that must
//! continue and the VM snapshot, sealed together.
//!
//! The layout (all lengths u32 little-endian):
//!
//! ```text
//! magic "AJSB" | version u16 | keyed u8 | artifact len+bytes | policies len+JSON |
//! settings len+JSON | snapshot len+bytes | tag (32 bytes)
//! ```
//!
//! The tag covers **every byte before it**: an HMAC-SHA256 under a [`BundleKey`] when the bundle
//! is keyed, else a SHA-256. A keyed bundle cannot be changed — policy, settings, artifact or
//! snapshot — by anyone without the key. An unkeyed bundle's hash only catches accidents
//! (truncation, a flipped bit): anyone who can edit the file can recompute it.

use std::collections::BTreeMap;
use std::fmt;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{GatedRunner, Options, Policy, RunSettings, VerifiedProgram};

/// The first bytes of every bundle.
pub const BUNDLE_MAGIC: [u8; 4] = *b"AJSB";
/// The bundle format version this build writes and reads.
pub const BUNDLE_VERSION: u16 = 1;
/// Shortest key a keyed bundle accepts (HMAC-SHA256's own output size).
pub const MIN_KEY_BYTES: usize = 32;
const TAG_LEN: usize = 32;
const HEADER_LEN: usize = 4 + 2 + 1;

/// A key for sealing bundles: at least [`MIN_KEY_BYTES`] bytes. Its `Debug` shows no byte.
#[derive(Clone, PartialEq, Eq)]
pub struct BundleKey(Vec<u8>);

impl BundleKey {
    /// A key from its bytes.
    ///
    /// # Errors
    /// [`BundleError::ShortKey`] when it has fewer than [`MIN_KEY_BYTES`] bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<BundleKey, BundleError> {
        let bytes = bytes.into();
        if bytes.len() < MIN_KEY_BYTES {
            return Err(BundleError::ShortKey { len: bytes.len() });
        }
        Ok(BundleKey(bytes))
    }

    /// The key's bytes (also the key of the snapshot inside, [`crate::Approvals::key`]).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for BundleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BundleKey({} bytes)", self.0.len())
    }
}

/// The run settings a suspended run continues under (the snapshot carries the fuel left, the
/// quotas used, the heap ceiling and the log caps; these are the rest).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleSettings {
    /// The run's fuel budget ([`Options::fuel`]).
    pub fuel: f64,
    /// The run's wall-clock limit ([`Options::timeout_ms`]); time spent before the suspension
    /// counts against it.
    pub timeout_ms: u64,
    /// Whether the run keeps a journal ([`RunSettings::journal`]).
    pub journal: bool,
    /// [`RunSettings::max_calls`].
    pub max_calls: Option<u32>,
    /// [`RunSettings::max_output_bytes`].
    pub max_output_bytes: Option<usize>,
    /// [`RunSettings::max_journal_bytes`].
    pub max_journal_bytes: Option<usize>,
}

impl BundleSettings {
    /// The settings of a run started with `options` and `settings`.
    pub fn of(options: &Options, settings: &RunSettings) -> BundleSettings {
        BundleSettings {
            fuel: options.fuel,
            timeout_ms: options.timeout_ms,
            journal: settings.journal,
            max_calls: settings.max_calls,
            max_output_bytes: settings.max_output_bytes,
            max_journal_bytes: settings.max_journal_bytes,
        }
    }

    /// Puts these settings back into the options and settings a run resumes with.
    pub fn apply(&self, options: &mut Options, settings: &mut RunSettings) {
        options.fuel = self.fuel;
        options.timeout_ms = self.timeout_ms;
        settings.journal = self.journal;
        settings.max_calls = self.max_calls;
        settings.max_output_bytes = self.max_output_bytes;
        settings.max_journal_bytes = self.max_journal_bytes;
    }
}

/// A suspended run: everything [`crate::GatedRunner::resume`] needs, in any process.
#[derive(Clone, Debug, PartialEq)]
pub struct Bundle {
    /// The program's artifact ([`crate::Program::to_bytes`]).
    pub artifact: Vec<u8>,
    /// The approval policies in force, by atom (they stay in force on resume).
    pub policies: Vec<(String, Policy)>,
    /// The settings that continue.
    pub settings: BundleSettings,
    /// The VM snapshot ([`crate::Suspended::snapshot`]).
    pub snapshot: Vec<u8>,
}

/// Why a bundle was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    /// Not a bundle.
    #[error("not a saved run (no AJSB magic): give the file a suspended run was saved to")]
    NotABundle,
    /// Written by another format version.
    #[error("saved run format version {found} is not this build's {expected}: resume it with the build that saved it")]
    Version {
        /// In the bundle.
        found: u16,
        /// This build's.
        expected: u16,
    },
    /// Cut short, or bytes past its end.
    #[error(
        "the saved run is truncated or has bytes past its end: use the file as it was written"
    )]
    Truncated,
    /// The tag does not match.
    #[error("saved run refused: the integrity check failed: its bytes were altered or the key is wrong; use the file as it was written, with the key it was sealed with")]
    Integrity,
    /// A keyed bundle opened without a key.
    #[error("the saved run is keyed: give the key it was sealed with")]
    KeyRequired,
    /// An unkeyed bundle opened with a key.
    #[error("the saved run is not keyed, but a key was given: it may have been edited by anyone; open it without a key only if nobody untrusted could write it, or run it again with the key")]
    NotKeyed,
    /// A key shorter than [`MIN_KEY_BYTES`].
    #[error("the key has {len} bytes; a key must have at least {MIN_KEY_BYTES} (MIN_KEY_BYTES): use 32 random bytes or more, e.g. `openssl rand -hex 32`")]
    ShortKey {
        /// Its length.
        len: usize,
    },
    /// A section does not parse (only a sealer that wrote nonsense gets this).
    #[error("the saved run's {section} do not parse: {detail}")]
    Section {
        /// `policies` or `settings`.
        section: &'static str,
        /// The parser's words.
        detail: String,
    },
}

fn tag(key: Option<&BundleKey>, bytes: &[u8]) -> [u8; TAG_LEN] {
    match key {
        Some(k) => {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(k.as_bytes())
                .expect("HMAC takes a key of any length");
            m.update(bytes);
            m.finalize().into_bytes().into()
        }
        None => Sha256::digest(bytes).into(),
    }
}

fn put(out: &mut Vec<u8>, section: &[u8]) {
    let len = u32::try_from(section.len()).expect("a bundle section is under 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(section);
}

/// Reads length-prefixed sections in order.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn section(&mut self) -> Result<&'a [u8], BundleError> {
        let (len, rest) = self
            .rest
            .split_at_checked(4)
            .ok_or(BundleError::Truncated)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (s, rest) = rest.split_at_checked(len).ok_or(BundleError::Truncated)?;
        self.rest = rest;
        Ok(s)
    }
}

/// The policies as a JSON object, atoms in order: `{"httpFetch":"pause"}`.
fn policies_json(policies: &[(String, Policy)]) -> Vec<u8> {
    let map: BTreeMap<&str, &str> = policies
        .iter()
        .map(|(atom, p)| (atom.as_str(), p.as_str()))
        .collect();
    serde_json::to_vec(&map).expect("a map of strings serializes")
}

fn parse_policies(bytes: &[u8]) -> Result<Vec<(String, Policy)>, BundleError> {
    let bad = |detail: String| BundleError::Section {
        section: "policies",
        detail,
    };
    let map: BTreeMap<String, String> =
        serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    map.into_iter()
        .map(|(atom, p)| Ok((atom, p.parse().map_err(bad)?)))
        .collect()
}

impl Bundle {
    /// The bundle of a run `runner` suspended: `program`'s artifact, the runner's policies (by
    /// atom), its settings and the snapshot ([`crate::Suspended::snapshot`]).
    pub fn of(runner: &GatedRunner, program: &VerifiedProgram, snapshot: Vec<u8>) -> Bundle {
        let mut policies: Vec<(String, Policy)> = runner
            .approvals
            .policies
            .iter()
            .map(|(a, p)| (a.clone(), *p))
            .collect();
        policies.sort_by(|a, b| a.0.cmp(&b.0));
        Bundle {
            artifact: program.to_bytes(),
            policies,
            settings: BundleSettings::of(&runner.options, &runner.settings),
            snapshot,
        }
    }

    /// The bundle's bytes, tagged with an HMAC-SHA256 under `key` or, without one, a SHA-256
    /// (which protects against accidents only: see the module's docs).
    ///
    /// # Panics
    /// When a section is 4 GiB or more (artifacts and snapshots are capped far below).
    pub fn seal(&self, key: Option<&BundleKey>) -> Vec<u8> {
        let settings = serde_json::to_vec(&self.settings).expect("settings serialize");
        let policies = policies_json(&self.policies);
        let mut out = Vec::with_capacity(
            HEADER_LEN
                + 16
                + self.artifact.len()
                + policies.len()
                + settings.len()
                + self.snapshot.len()
                + TAG_LEN,
        );
        out.extend_from_slice(&BUNDLE_MAGIC);
        out.extend_from_slice(&BUNDLE_VERSION.to_le_bytes());
        out.push(u8::from(key.is_some()));
        put(&mut out, &self.artifact);
        put(&mut out, &policies);
        put(&mut out, &settings);
        put(&mut out, &self.snapshot);
        let t = tag(key, &out);
        out.extend_from_slice(&t);
        out
    }

    /// Checks and reads a bundle. The tag is checked (in constant time) before any section is
    /// read; the artifact and the snapshot are then still to be verified by their own loaders.
    ///
    /// # Errors
    /// [`BundleError`]: not a bundle, another version, a keyed bundle without the key or an
    /// unkeyed one with a key, a tag that does not match (altered bytes or a wrong key),
    /// truncated or trailing bytes, a section that does not parse.
    pub fn open(bytes: &[u8], key: Option<&BundleKey>) -> Result<Bundle, BundleError> {
        if bytes.len() < 4 || bytes[..4] != BUNDLE_MAGIC {
            return Err(BundleError::NotABundle);
        }
        if bytes.len() < HEADER_LEN + TAG_LEN {
            return Err(BundleError::Truncated);
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != BUNDLE_VERSION {
            return Err(BundleError::Version {
                found: version,
                expected: BUNDLE_VERSION,
            });
        }
        match (bytes[6], key) {
            (0, None) | (1, Some(_)) => {}
            (1, None) => return Err(BundleError::KeyRequired),
            (0, Some(_)) => return Err(BundleError::NotKeyed),
            _ => return Err(BundleError::Integrity),
        }
        let (signed, given) = bytes.split_at(bytes.len() - TAG_LEN);
        let want = tag(key, signed);
        let diff = want
            .iter()
            .zip(given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(BundleError::Integrity);
        }
        let mut r = Reader {
            rest: &signed[HEADER_LEN..],
        };
        let artifact = r.section()?.to_vec();
        let policies = r.section()?;
        let settings = r.section()?;
        let snapshot = r.section()?.to_vec();
        if !r.rest.is_empty() {
            return Err(BundleError::Truncated);
        }
        let policies = parse_policies(policies)?;
        let settings = serde_json::from_slice(settings).map_err(|e| BundleError::Section {
            section: "settings",
            detail: e.to_string(),
        })?;
        Ok(Bundle {
            artifact,
            policies,
            settings,
            snapshot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> BundleKey {
        BundleKey::new(vec![b; MIN_KEY_BYTES]).unwrap()
    }

    fn sample() -> Bundle {
        Bundle {
            artifact: b"artifact bytes".to_vec(),
            policies: vec![
                ("llmPredict".into(), Policy::Collect),
                ("httpFetch".into(), Policy::Pause),
            ],
            settings: BundleSettings {
                fuel: 1000.0,
                timeout_ms: 60_000,
                journal: true,
                max_calls: Some(3),
                max_output_bytes: None,
                max_journal_bytes: Some(4096),
            },
            snapshot: b"snapshot bytes".to_vec(),
        }
    }

    /// The bundle with its policies sorted, as `open` returns them.
    fn sorted(mut b: Bundle) -> Bundle {
        b.policies.sort_by(|x, y| x.0.cmp(&y.0));
        b
    }

    /// Replaces `from` by `to` (same length) inside `bytes`.
    fn edit(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let at = bytes
            .windows(from.len())
            .position(|w| w == from)
            .expect("present");
        let mut out = bytes.to_vec();
        out[at..at + to.len()].copy_from_slice(to);
        out
    }

    #[test]
    fn keyed_and_unkeyed_bundles_round_trip() {
        let k = key(7);
        let b = sample();
        assert_eq!(
            Bundle::open(&b.seal(Some(&k)), Some(&k)),
            Ok(sorted(b.clone()))
        );
        assert_eq!(Bundle::open(&b.seal(None), None), Ok(sorted(b)));
    }

    #[test]
    fn an_edited_policy_in_a_keyed_bundle_is_refused() {
        // the issue's attack: pause becomes allow (the same length)
        let k = key(7);
        let sealed = sample().seal(Some(&k));
        let edited = edit(
            &sealed,
            br#""httpFetch":"pause""#,
            br#""httpFetch":"allow""#,
        );
        assert_eq!(Bundle::open(&edited, Some(&k)), Err(BundleError::Integrity));
    }

    #[test]
    fn edited_artifact_settings_or_snapshot_bytes_are_refused() {
        let k = key(7);
        let sealed = sample().seal(Some(&k));
        for (from, to) in [
            (&b"artifact"[..], &b"artifacT"[..]),
            (b"\"timeoutMs\":60000", b"\"timeoutMs\":99999"),
            (b"\"maxCalls\":3", b"\"maxCalls\":9"),
            (b"snapshot", b"snapsh0t"),
        ] {
            let edited = edit(&sealed, from, to);
            assert_eq!(
                Bundle::open(&edited, Some(&k)),
                Err(BundleError::Integrity),
                "{}",
                String::from_utf8_lossy(to)
            );
        }
    }

    #[test]
    fn truncated_or_extended_bundles_are_refused() {
        let k = key(7);
        let sealed = sample().seal(Some(&k));
        for n in 0..sealed.len() {
            assert!(Bundle::open(&sealed[..n], Some(&k)).is_err(), "cut at {n}");
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert!(Bundle::open(&longer, Some(&k)).is_err());
        assert_eq!(Bundle::open(b"AJS", Some(&k)), Err(BundleError::NotABundle));
        assert_eq!(
            Bundle::open(&sealed[..HEADER_LEN + 3], Some(&k)),
            Err(BundleError::Truncated)
        );
    }

    #[test]
    fn the_wrong_key_a_missing_key_and_an_unexpected_key_are_refused() {
        let sealed = sample().seal(Some(&key(7)));
        assert_eq!(
            Bundle::open(&sealed, Some(&key(8))),
            Err(BundleError::Integrity)
        );
        assert_eq!(Bundle::open(&sealed, None), Err(BundleError::KeyRequired));
        let plain = sample().seal(None);
        let e = Bundle::open(&plain, Some(&key(7))).unwrap_err();
        assert_eq!(e, BundleError::NotKeyed);
        assert!(e.to_string().contains("without a key"), "{e}");
        // downgrading a keyed bundle to unkeyed (flag cleared, hash recomputed) is refused to
        // whoever opens with the key
        let mut downgraded = sealed[..sealed.len() - TAG_LEN].to_vec();
        downgraded[6] = 0;
        let h: [u8; 32] = Sha256::digest(&downgraded).into();
        downgraded.extend_from_slice(&h);
        assert_eq!(
            Bundle::open(&downgraded, Some(&key(7))),
            Err(BundleError::NotKeyed)
        );
    }

    #[test]
    fn keys_shorter_than_min_key_bytes_are_refused() {
        let e = BundleKey::new(vec![1u8; MIN_KEY_BYTES - 1]).unwrap_err();
        assert_eq!(
            e,
            BundleError::ShortKey {
                len: MIN_KEY_BYTES - 1
            }
        );
        assert!(e.to_string().contains("at least 32"), "{e}");
        assert!(BundleKey::new(vec![1u8; MIN_KEY_BYTES]).is_ok());
        assert_eq!(format!("{:?}", key(7)), "BundleKey(32 bytes)");
    }

    #[test]
    fn every_single_byte_flip_of_a_keyed_bundle_is_refused() {
        let k = key(7);
        let sealed = sample().seal(Some(&k));
        for i in 0..sealed.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = sealed.clone();
                b[i] ^= bit;
                assert!(
                    Bundle::open(&b, Some(&k)).is_err(),
                    "flipping bit {bit:#x} of byte {i} was accepted"
                );
            }
        }
        // and unkeyed: every flip is caught too (accidents), though anyone may reseal
        let plain = sample().seal(None);
        for i in 0..plain.len() {
            let mut b = plain.clone();
            b[i] ^= 0x01;
            assert!(Bundle::open(&b, None).is_err(), "byte {i}");
        }
    }

    #[test]
    fn another_version_is_refused_with_both_numbers() {
        let mut b = sample().seal(None);
        b[4] = 9;
        let e = Bundle::open(&b, None).unwrap_err();
        assert_eq!(
            e,
            BundleError::Version {
                found: 9,
                expected: BUNDLE_VERSION
            }
        );
    }
}
