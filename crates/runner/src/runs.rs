//! Approvals in the server: a run that reaches a gated call is saved in a [`RunStore`] and
//! answered `202`; a decision posted to any instance sharing the store claims it (exactly once)
//! and resumes it there. The HTTP side is [`crate::runs_api`].
//!
//! What a record holds is sealed: the [`Bundle`] (artifact, policies, settings, snapshot) under
//! the MAC key, and around it an envelope binding the run id, the request's depth and `log`
//! flag, the record version and the pending calls shown to deciders, under the same key; a
//! finished run's outcome and journal carry a tag under it too. Whoever can write the
//! database cannot change what a run does, what a decider is shown or what a run answered;
//! they can delete runs or roll a whole record back (the database is trusted for freshness, see docs/deployment.md).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ajs::store::{self, Completion, NewRun, RunStatus, RunStore, StoreError};
use ajs::{
    Approvals, Bundle, BundleKey, Decision, GatedRunner, Options, PendingCall, Policy, RunResult,
    RunSettings, Suspended, VerifiedProgram,
};
use hmac::{Hmac, Mac};
use hyper::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::config::ServerConfig;
use crate::output::outcome_json;
use crate::server::metrics::Metrics;

/// How long a suspended run waits for a decision when `approvals.ttlSeconds` is not set.
pub const DEFAULT_TTL_SECONDS: u64 = 24 * 60 * 60;
/// How long a record stays after it expired (or finished and its TTL passed) before it is
/// deleted, when `approvals.graceSeconds` is not set.
pub const DEFAULT_GRACE_SECONDS: u64 = 24 * 60 * 60;
/// A claim's lease lasts the run's timeout plus this: a resumption cannot outlive its timeout,
/// so a lease that runs out means the claimant died.
pub const LEASE_MARGIN_MS: i64 = 60_000;
/// How often each instance marks abandoned runs and deletes expired ones.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// Runs listed by `GET /runs` when the request names no `limit`.
pub const DEFAULT_LIST_LIMIT: usize = 100;
/// Most runs one `GET /runs` lists (`limit` above it is a 400).
pub const MAX_LIST_LIMIT: usize = 1000;

const ENVELOPE_MAGIC: &[u8; 4] = b"AJSE";
const TAG_LEN: usize = 32;

/// `[approvals]`: which atoms wait for a person, where waiting runs are kept, and the secrets.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// Atoms whose every call pauses the run (`pause` policy), e.g. `["httpFetch"]`.
    #[serde(default)]
    pub atoms: Vec<String>,
    /// Atoms whose calls are collected (`collect` policy): deferred until the run needs a
    /// result, then decided together.
    #[serde(default)]
    pub collect: Vec<String>,
    /// Where waiting runs are kept: `sqlite:PATH` or `postgres://…` (default
    /// [`store::DEFAULT_STORE`], `sqlite:ajs-runs.db` in the working directory).
    #[serde(default)]
    pub store: Option<String>,
    /// The environment variable holding the MAC key (at least 32 bytes).
    pub key_env: String,
    /// The environment variable holding the bearer token every `/runs` request must carry.
    pub token_env: String,
    /// Seconds a suspended run waits for a decision (default [`DEFAULT_TTL_SECONDS`]).
    #[serde(default = "default_ttl")]
    pub ttl_seconds: u64,
    /// Seconds an expired or finished record is kept before deletion (default
    /// [`DEFAULT_GRACE_SECONDS`]).
    #[serde(default = "default_grace")]
    pub grace_seconds: u64,
}

fn default_ttl() -> u64 {
    DEFAULT_TTL_SECONDS
}

fn default_grace() -> u64 {
    DEFAULT_GRACE_SECONDS
}

impl ApprovalsConfig {
    /// Checks the values (not the environment: see [`Runs::open`]).
    ///
    /// # Errors
    /// The first field out of range.
    pub fn check(&self) -> Result<(), String> {
        if self.atoms.is_empty() && self.collect.is_empty() {
            return Err("approvals: name the atoms that wait for a decision, e.g. atoms = [\"httpFetch\"] (or remove [approvals])".into());
        }
        if let Some(a) = self.atoms.iter().find(|a| self.collect.contains(a)) {
            return Err(format!(
                "approvals: '{a}' is in both atoms and collect; keep it in one"
            ));
        }
        if self.key_env.is_empty() || self.token_env.is_empty() {
            return Err("approvals.keyEnv and approvals.tokenEnv name environment variables, e.g. keyEnv = \"AJS_RUNS_KEY\"".into());
        }
        if self.key_env == self.token_env {
            return Err(format!("approvals.keyEnv and approvals.tokenEnv both name {}: the token is handed to deciders, the key must stay with the servers; use two variables", self.key_env));
        }
        if self.ttl_seconds == 0 || self.ttl_seconds > 365 * 24 * 3600 {
            return Err("approvals.ttlSeconds must be between 1 and 31536000 (a year)".into());
        }
        if self.grace_seconds > 365 * 24 * 3600 {
            return Err("approvals.graceSeconds must be at most 31536000 (a year)".into());
        }
        Ok(())
    }

    /// The policies, by atom.
    pub fn policies(&self) -> Vec<(String, Policy)> {
        let mut p: Vec<(String, Policy)> = self
            .atoms
            .iter()
            .map(|a| (a.clone(), Policy::Pause))
            .chain(self.collect.iter().map(|a| (a.clone(), Policy::Collect)))
            .collect();
        p.sort_by(|a, b| a.0.cmp(&b.0));
        p
    }
}

/// What an approvals request answers: status, body, and what the request log records.
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The JSON body.
    pub body: Value,
    /// Fuel the run used, when it ran.
    pub fuel: Option<f64>,
    /// The error kind, when there is one.
    pub kind: Option<&'static str>,
}

impl Answer {
    /// A refusal: `{ "error": { "kind", "message" } }`.
    pub fn refuse(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Answer {
        Answer {
            status,
            body: json!({ "error": { "kind": kind, "message": message.into() } }),
            fuel: None,
            kind: Some(kind),
        }
    }

    fn ok(status: StatusCode, body: Value) -> Answer {
        Answer {
            status,
            body,
            fuel: None,
            kind: None,
        }
    }
}

fn store_refusal(e: &StoreError) -> Answer {
    match e {
        StoreError::NotFound => Answer::refuse(StatusCode::NOT_FOUND, "notFound", e.to_string()),
        StoreError::AlreadyDecided => {
            Answer::refuse(StatusCode::CONFLICT, "alreadyDecided", e.to_string())
        }
        StoreError::Expired => Answer::refuse(StatusCode::GONE, "expired", e.to_string()),
        e => {
            tracing::warn!(error = %e, "run store failed");
            Answer::refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "storeUnavailable",
                format!("{e}; retry later"),
            )
        }
    }
}

/// The request context a saved run continues with.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Meta {
    depth: u32,
    log: bool,
}

/// The envelope's MAC over the run id and the record version it is stored at: a record set
/// back to an earlier suspension (or a status edited back to `suspended`) no longer checks.
fn envelope_mac(key: &BundleKey, id: &str, version: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut m =
        <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()).expect("HMAC takes any key length");
    m.update(b"ajs-run-envelope\0");
    m.update(id.as_bytes());
    m.update(b"\0");
    m.update(&version.to_le_bytes());
    m.update(body);
    m
}

fn put(out: &mut Vec<u8>, section: &[u8]) {
    let len = u32::try_from(section.len()).expect("a record section is under 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(section);
}

fn seal_envelope(
    key: &BundleKey,
    id: &str,
    version: i64,
    meta: Meta,
    pending: &str,
    bundle: &[u8],
) -> Vec<u8> {
    let mut out = ENVELOPE_MAGIC.to_vec();
    put(
        &mut out,
        &serde_json::to_vec(&meta).expect("meta serializes"),
    );
    put(&mut out, pending.as_bytes());
    put(&mut out, bundle);
    let t = envelope_mac(key, id, version, &out).finalize().into_bytes();
    out.extend_from_slice(&t);
    out
}

/// The meta, pending calls (JSON) and sealed bundle of a record, once its tag checks.
fn open_envelope<'a>(
    key: &BundleKey,
    id: &str,
    version: i64,
    bytes: &'a [u8],
) -> Result<(Meta, &'a str, &'a [u8]), &'static str> {
    const ALTERED: &str = "the stored run was altered or sealed with another key";
    let (body, tag) = bytes
        .split_at_checked(bytes.len().saturating_sub(TAG_LEN))
        .ok_or(ALTERED)?;
    envelope_mac(key, id, version, body)
        .verify_slice(tag)
        .map_err(|_| ALTERED)?;
    let mut rest = body.strip_prefix(ENVELOPE_MAGIC).ok_or(ALTERED)?;
    let mut section = || -> Result<&'a [u8], &'static str> {
        let (len, r) = rest.split_at_checked(4).ok_or(ALTERED)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (s, r) = r.split_at_checked(len).ok_or(ALTERED)?;
        rest = r;
        Ok(s)
    };
    let meta: Meta = serde_json::from_slice(section()?).map_err(|_| ALTERED)?;
    let pending = std::str::from_utf8(section()?).map_err(|_| ALTERED)?;
    let bundle = section()?;
    Ok((meta, pending, bundle))
}

/// The MAC of a finished run's outcome and journal, bound to its id and the record version it
/// is stored at, in hex: stored ahead of the outcome so the database cannot forge a result.
fn outcome_tag(
    key: &BundleKey,
    id: &str,
    version: i64,
    outcome: &str,
    journal: Option<&[u8]>,
) -> String {
    let mut m =
        <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()).expect("HMAC takes any key length");
    m.update(b"ajs-run-outcome\0");
    m.update(id.as_bytes());
    m.update(b"\0");
    m.update(&version.to_le_bytes());
    m.update(&(outcome.len() as u64).to_le_bytes());
    m.update(outcome.as_bytes());
    match journal {
        Some(j) => {
            m.update(b"\x01");
            m.update(j);
        }
        None => m.update(b"\x00"),
    }
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The outcome (JSON) of a done record once its tag checks; the sweep's unsealed
/// [`store::ABANDONED_OUTCOME`] is taken as is (it marks a run that can no longer run).
fn open_outcome<'a>(key: &BundleKey, rec: &'a store::RunRecord) -> Result<&'a str, &'static str> {
    const ALTERED: &str = "the stored outcome was altered or sealed with another key";
    let stored = rec.outcome.as_deref().ok_or(ALTERED)?;
    if stored == store::ABANDONED_OUTCOME && rec.journal.is_none() {
        return Ok(stored);
    }
    let (tag, outcome) = stored.split_at_checked(2 * TAG_LEN).ok_or(ALTERED)?;
    let want = outcome_tag(key, &rec.id, rec.version, outcome, rec.journal.as_deref());
    let same = tag.len() == want.len()
        && tag
            .bytes()
            .zip(want.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(outcome)
    } else {
        Err(ALTERED)
    }
}

fn pending_json(pending: &[PendingCall]) -> Value {
    Value::Array(
        pending
            .iter()
            .map(|p| {
                json!({ "id": p.id, "atom": p.atom, "input": p.input.to_json(), "inputHash": p.input_hash })
            })
            .collect(),
    )
}

/// One decision in `POST /runs/{runId}/decisions`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionIn {
    /// The pending call's id.
    pub id: u32,
    /// Run it (`true`) or deny it (`false`: the guest gets a catchable denial).
    pub approve: bool,
}

/// The body of `POST /runs/{runId}/decisions`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionsIn {
    /// One decision per pending call.
    pub decisions: Vec<DecisionIn>,
}

/// The approvals of one server: its store, key, token and policies.
pub struct Runs {
    store: Arc<dyn RunStore>,
    metrics: Arc<Metrics>,
    key: BundleKey,
    token_hash: [u8; 32],
    policies: Vec<(String, Policy)>,
    ttl_ms: i64,
    grace_ms: i64,
}

fn env_secret(var: &str, field: &str) -> Result<Vec<u8>, String> {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => Ok(v.into_encoded_bytes()),
        _ => Err(format!(
            "approvals.{field}: the environment variable {var} is not set; export it (e.g. `export {var}=$(openssl rand -hex 32)`) or remove [approvals]"
        )),
    }
}

impl Runs {
    /// Reads the key and token from the environment and opens the store (creating its schema).
    ///
    /// # Errors
    /// A variable unset, a key under 32 bytes, a store that cannot be opened.
    pub async fn open(cfg: &ApprovalsConfig, metrics: Arc<Metrics>) -> Result<Runs, String> {
        cfg.check()?;
        let key = BundleKey::new(env_secret(&cfg.key_env, "keyEnv")?)
            .map_err(|e| format!("approvals.keyEnv {}: {e}", cfg.key_env))?;
        let token = env_secret(&cfg.token_env, "tokenEnv")?;
        if token == key.as_bytes() {
            return Err(format!("approvals: {} and {} hold the same secret; the token is handed to deciders, the MAC key must stay with the servers: generate two (e.g. `openssl rand -hex 32` twice)", cfg.key_env, cfg.token_env));
        }
        let spec = cfg.store.as_deref().unwrap_or(store::DEFAULT_STORE);
        let store = store::open(spec)
            .await
            .map_err(|e| format!("approvals.store: {e}"))?;
        Ok(Runs {
            store,
            metrics,
            key,
            token_hash: Sha256::digest(&token).into(),
            policies: cfg.policies(),
            ttl_ms: i64::try_from(cfg.ttl_seconds.saturating_mul(1000)).unwrap_or(i64::MAX),
            grace_ms: i64::try_from(cfg.grace_seconds.saturating_mul(1000)).unwrap_or(i64::MAX),
        })
    }

    /// Awaits a store operation, recording its latency as `ajs_store_seconds{op}`.
    async fn timed<T>(
        &self,
        op: &'static str,
        f: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let t = std::time::Instant::now();
        let r = f.await;
        self.metrics.observe_store(op, t.elapsed());
        r
    }

    /// Recounts the suspended runs into `ajs_runs_suspended` (after every transition into or
    /// out of `suspended`, so the gauge does not wait for the sweep).
    async fn refresh_suspended(&self) {
        match self
            .timed(
                "count",
                self.store.count(RunStatus::Suspended, store::now_ms()),
            )
            .await
        {
            Ok(n) => self.metrics.set_suspended(n),
            Err(e) => tracing::warn!(error = %e, "run store count failed"),
        }
    }

    /// The store's kind (`sqlite`, `postgres`).
    pub fn store_kind(&self) -> &'static str {
        self.store.kind()
    }

    /// Whether an `Authorization` header value carries the token (the scheme `Bearer` in any
    /// case; the token compared in constant time, as SHA-256 digests so the length is not
    /// compared either).
    pub fn authorized(&self, header: Option<&[u8]>) -> bool {
        let Some((scheme, given)) = header.and_then(|h| h.split_at_checked(7)) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"Bearer ") {
            return false;
        }
        let given: [u8; 32] = Sha256::digest(given).into();
        given
            .iter()
            .zip(self.token_hash.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    /// Whether the program calls a gated atom (it then runs gated; other programs run as usual).
    pub fn gates(&self, program: &VerifiedProgram) -> bool {
        program
            .atoms
            .iter()
            .any(|a| self.policies.iter().any(|(g, _)| g == a))
    }

    fn runner(
        &self,
        config: &ServerConfig,
        depth: u32,
        options: Options,
        policies: &[(String, Policy)],
        settings: RunSettings,
    ) -> Result<GatedRunner, Answer> {
        let mut approvals = Approvals::default().suspend(true).key(self.key.as_bytes());
        for (atom, p) in policies {
            approvals = approvals.policy(atom.clone(), *p);
        }
        GatedRunner::new(config.runner(depth), options, approvals, settings)
            .map_err(|e| Answer::refuse(StatusCode::BAD_REQUEST, "badRequest", e.to_string()))
    }

    /// `POST /run` of a program calling a gated atom: runs it until it ends (200) or stops
    /// for decisions (saved, 202).
    pub async fn start(
        &self,
        config: &ServerConfig,
        program: &VerifiedProgram,
        args: &Value,
        options: Options,
        depth: u32,
        log: bool,
    ) -> Answer {
        let settings = RunSettings {
            journal: true,
            ..RunSettings::default()
        };
        let runner = match self.runner(config, depth, options, &self.policies, settings) {
            Ok(r) => r,
            Err(a) => return a,
        };
        match runner.start(program, args).await {
            RunResult::Finished(r) => finished(&r.outcome, log),
            RunResult::Suspended(s) => {
                let id = match store::new_run_id() {
                    Ok(id) => id,
                    Err(e) => return store_refusal(&e),
                };
                let now = store::now_ms();
                let (sealed, pending) = self.seal(&id, 1, &runner, program, s, Meta { depth, log });
                let run = NewRun {
                    id: id.clone(),
                    bundle: sealed,
                    pending: pending.to_string(),
                    created_ms: now,
                    expires_ms: now.saturating_add(self.ttl_ms),
                };
                if let Err(e) = self.timed("insert", self.store.insert(run)).await {
                    return store_refusal(&e);
                }
                self.refresh_suspended().await;
                suspended(&id, pending, now.saturating_add(self.ttl_ms))
            }
        }
    }

    /// Seals a suspension for the record version it will be stored at (an insert is version
    /// 1; a claim at `v` that suspends again is stored at `v + 1`).
    fn seal(
        &self,
        id: &str,
        version: i64,
        runner: &GatedRunner,
        program: &VerifiedProgram,
        s: Suspended,
        meta: Meta,
    ) -> (Vec<u8>, Value) {
        let pending = pending_json(&s.pending);
        let bundle = Bundle::of(runner, program, s.snapshot).seal(Some(&self.key));
        let text = pending.to_string();
        (
            seal_envelope(&self.key, id, version, meta, &text, &bundle),
            pending,
        )
    }

    /// A done record's outcome column: its tag (for the version it is stored at), then the JSON.
    fn seal_outcome(&self, id: &str, version: i64, body: &Value, journal: Option<&[u8]>) -> String {
        let text = body.to_string();
        format!(
            "{}{text}",
            outcome_tag(&self.key, id, version, &text, journal)
        )
    }

    /// `GET /runs/{runId}`.
    pub async fn show(&self, id: &str) -> Answer {
        let rec = match self.timed("get", self.store.get(id, store::now_ms())).await {
            Ok(Some(r)) => r,
            Ok(None) => return store_refusal(&StoreError::NotFound),
            Err(e) => return store_refusal(&e),
        };
        let status = rec.status.name();
        match rec.status {
            RunStatus::Suspended => match open_envelope(&self.key, id, rec.version, &rec.bundle) {
                Ok((_, pending, _)) => Answer::ok(
                    StatusCode::OK,
                    json!({ "status": status, "runId": id,
                        "pending": serde_json::from_str::<Value>(pending).unwrap_or(Value::Null),
                        "expiresAtMs": rec.expires_ms }),
                ),
                Err(m) => altered(m),
            },
            RunStatus::Done => match open_outcome(&self.key, &rec) {
                Ok(o) => Answer::ok(
                    StatusCode::OK,
                    json!({ "status": status, "runId": id,
                        "outcome": serde_json::from_str::<Value>(o).unwrap_or(Value::Null) }),
                ),
                Err(m) => altered(m),
            },
            RunStatus::Running | RunStatus::Expired => {
                Answer::ok(StatusCode::OK, json!({ "status": status, "runId": id }))
            }
        }
    }

    /// `GET /runs?status=…&limit=…`.
    pub async fn list(&self, status: RunStatus, limit: usize) -> Answer {
        match self
            .timed("list", self.store.list(status, store::now_ms(), limit))
            .await
        {
            Ok(runs) => Answer::ok(
                StatusCode::OK,
                json!({ "runs": runs.iter().map(|r| json!({
                    "runId": r.id, "status": r.status.name(),
                    "createdAtMs": r.created_ms, "expiresAtMs": r.expires_ms
                })).collect::<Vec<_>>() }),
            ),
            Err(e) => store_refusal(&e),
        }
    }

    /// `GET /runs/{runId}/journal`: the journal's bytes once the run is done.
    pub async fn journal(&self, id: &str) -> Result<Vec<u8>, Answer> {
        let rec = match self.timed("get", self.store.get(id, store::now_ms())).await {
            Ok(Some(r)) => r,
            Ok(None) => return Err(store_refusal(&StoreError::NotFound)),
            Err(e) => return Err(store_refusal(&e)),
        };
        if rec.status == RunStatus::Done {
            if let Err(m) = open_outcome(&self.key, &rec) {
                return Err(altered(m));
            }
        }
        match (rec.status, rec.journal) {
            (RunStatus::Done, Some(j)) => Ok(j),
            (RunStatus::Done, None) => Err(Answer::refuse(
                StatusCode::NOT_FOUND,
                "noJournal",
                "This run ended without a journal (it was abandoned or refused on resume)",
            )),
            (RunStatus::Expired, _) => Err(store_refusal(&StoreError::Expired)),
            (s, _) => Err(Answer::refuse(
                StatusCode::CONFLICT,
                "notFinished",
                format!(
                    "This run is {}: its journal is kept once it is done; decide it first",
                    s.name()
                ),
            )),
        }
    }

    /// `POST /runs/{runId}/decisions`: claims the run (exactly once across every instance),
    /// resumes it here and answers like `POST /run`.
    pub async fn decide(&self, config: &ServerConfig, id: &str, input: DecisionsIn) -> Answer {
        let now = store::now_ms();
        let rec = match self.timed("get", self.store.get(id, now)).await {
            Ok(Some(r)) => r,
            Ok(None) => return store_refusal(&StoreError::NotFound),
            Err(e) => return store_refusal(&e),
        };
        match rec.status {
            RunStatus::Suspended => {}
            RunStatus::Expired => return store_refusal(&StoreError::Expired),
            RunStatus::Running | RunStatus::Done => {
                return store_refusal(&StoreError::AlreadyDecided)
            }
        }
        let (meta, _, sealed) = match open_envelope(&self.key, id, rec.version, &rec.bundle) {
            Ok(parts) => parts,
            Err(m) => return altered(m),
        };
        let bundle = match Bundle::open(sealed, Some(&self.key)) {
            Ok(b) => b,
            Err(e) => return altered(&e.to_string()),
        };
        let program = match ajs::load_artifact(&bundle.artifact, None) {
            Ok(p) => p,
            Err(e) => return altered(&format!("artifact refused: {e}")),
        };
        let mut options = config.base_options();
        let mut settings = RunSettings::default();
        bundle.settings.apply(&mut options, &mut settings);
        settings.journal = true;
        let timeout_ms = options.timeout_ms;
        let runner = match self.runner(config, meta.depth, options, &bundle.policies, settings) {
            Ok(r) => r,
            Err(a) => return a,
        };
        let calls = match runner.pending(&program, &bundle.snapshot) {
            Ok(c) => c,
            Err(e) => return altered(&e.to_string()),
        };
        // every decision is matched to a pending call before the claim: a malformed request
        // spends nothing
        let mut decisions = Vec::with_capacity(calls.len());
        let mut given: HashMap<u32, bool> = HashMap::new();
        for d in &input.decisions {
            if given.insert(d.id, d.approve).is_some() {
                return bad(format!(
                    "Two decisions for call {}; send one per call",
                    d.id
                ));
            }
        }
        if let Some(&oldest) = given.keys().min() {
            if calls.iter().all(|c| c.id > oldest) {
                return store_refusal(&StoreError::AlreadyDecided);
            }
        }
        for call in &calls {
            match given.remove(&call.id) {
                Some(true) => decisions.push(Decision::approve(call)),
                Some(false) => decisions.push(Decision::deny(call)),
                None => {
                    return bad(format!(
                        "No decision for pending call {} ('{}'); send {{\"id\": {}, \"approve\": true|false}} for each pending call",
                        call.id, call.atom, call.id
                    ))
                }
            }
        }
        if let Some(extra) = given.keys().next() {
            return bad(format!(
                "Call {extra} is not pending; GET /runs/{{runId}} lists the pending calls"
            ));
        }
        let lease = now
            .saturating_add(i64::try_from(timeout_ms).unwrap_or(i64::MAX))
            .saturating_add(LEASE_MARGIN_MS);
        let version = match self
            .timed("claim", self.store.claim(id, rec.version, now, lease))
            .await
        {
            Ok(v) => v,
            Err(e) => return store_refusal(&e),
        };
        self.refresh_suspended().await;
        let result = runner.resume(&program, &bundle.snapshot, decisions).await;
        let now = store::now_ms();
        let (end, answer) = match result {
            Ok(RunResult::Finished(r)) => {
                let answer = finished(&r.outcome, meta.log);
                let journal = r.journal.as_ref().map(ajs::Journal::to_bytes);
                let end = Completion::Done {
                    outcome: self.seal_outcome(id, version + 1, &answer.body, journal.as_deref()),
                    journal,
                    keep_until_ms: now.saturating_add(self.ttl_ms),
                };
                (end, answer)
            }
            Ok(RunResult::Suspended(s)) => {
                let (sealed, pending) = self.seal(id, version + 1, &runner, &program, s, meta);
                let expires = now.saturating_add(self.ttl_ms);
                let end = Completion::Suspended {
                    bundle: sealed,
                    pending: pending.to_string(),
                    expires_ms: expires,
                };
                (end, suspended(id, pending, expires))
            }
            Err(e) => {
                let answer = altered(&e.to_string());
                let end = Completion::Done {
                    outcome: self.seal_outcome(id, version + 1, &answer.body, None),
                    journal: None,
                    keep_until_ms: now.saturating_add(self.ttl_ms),
                };
                (end, answer)
            }
        };
        if let Err(e) = self
            .timed("complete", self.store.complete(id, version, end))
            .await
        {
            // the lease ran out (the run took longer than its timeout allows) or the store is
            // down: the answer stands, the record says what the sweep decided
            tracing::warn!(run_id = id, error = %e, "could not record the resumed run's end");
        }
        self.refresh_suspended().await;
        answer
    }

    /// Marks abandoned runs and deletes expired ones, every [`SWEEP_INTERVAL`], until dropped.
    pub fn spawn_sweeper(self: &Arc<Runs>) -> tokio::task::JoinHandle<()> {
        let runs = self.clone();
        tokio::spawn(async move {
            loop {
                let now = store::now_ms();
                runs.refresh_suspended().await;
                match runs
                    .timed("sweep", runs.store.sweep(now, runs.grace_ms))
                    .await
                {
                    Ok(s) if s.abandoned + s.purged > 0 => {
                        tracing::info!(
                            abandoned = s.abandoned,
                            purged = s.purged,
                            "run store swept"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "run store sweep failed"),
                }
                tokio::time::sleep(SWEEP_INTERVAL).await;
            }
        })
    }
}

fn bad(message: String) -> Answer {
    Answer::refuse(StatusCode::BAD_REQUEST, "badRequest", message)
}

fn altered(m: &str) -> Answer {
    tracing::warn!(error = m, "stored run refused");
    Answer::refuse(
        StatusCode::INTERNAL_SERVER_ERROR,
        "runRefused",
        format!("The stored run cannot be resumed: {m}. Check that every instance uses the same approvals.keyEnv key"),
    )
}

fn finished(outcome: &ajs::Outcome, log: bool) -> Answer {
    Answer {
        status: StatusCode::OK,
        body: outcome_json(outcome, log),
        fuel: Some(outcome.fuel_used),
        kind: outcome.error.as_ref().map(|e| e.kind.name()),
    }
}

fn suspended(id: &str, pending: Value, expires_ms: i64) -> Answer {
    Answer::ok(
        StatusCode::ACCEPTED,
        json!({ "status": "suspended", "runId": id, "pending": pending, "expiresAtMs": expires_ms }),
    )
}
