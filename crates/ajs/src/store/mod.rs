//! Where suspended runs wait for a decision: the [`RunStore`] trait, an in-memory store, and
//! (behind the `store-sqlite` and `store-postgres` features) the SQLite and PostgreSQL stores.
//!
//! A run record moves `suspended → running → done` (or back to `suspended` when the resumed run
//! stops for another decision). The step out of `suspended` is a [`RunStore::claim`]: one
//! conditional update on `(id, status = 'suspended', version, expires_ms > now)`, so among any
//! number of instances sharing a store exactly one claimant wins; every other learns
//! [`StoreError::AlreadyDecided`] or [`StoreError::Expired`]. A decision is therefore applied at
//! most once.
//!
//! A claim carries a lease (`claimed_until_ms`). A claimant that dies mid-run leaves the record
//! `running`; once the lease is over, [`RunStore::sweep`] marks it `done` with the outcome
//! [`ABANDONED_OUTCOME`]. It is never made resumable again: approved host calls may already have
//! run, and running them twice is worse than asking the caller to start over.
//!
//! A `suspended` record past `expires_ms` reads as [`RunStatus::Expired`] and cannot be claimed;
//! [`RunStore::sweep`] deletes every record that is not `running` once it is past its
//! `expires_ms` by the grace it is given.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

#[cfg(feature = "store-postgres")]
mod postgres;
#[cfg(feature = "store-sqlite")]
mod sqlite;

#[cfg(feature = "store-postgres")]
pub use postgres::PostgresRunStore;
#[cfg(feature = "store-sqlite")]
pub use sqlite::SqliteRunStore;

/// The store used when none is configured: a SQLite file in the working directory.
pub const DEFAULT_STORE: &str = "sqlite:ajs-runs.db";

/// The outcome a run gets when its claimant stopped before finishing it (see the module docs).
pub const ABANDONED_OUTCOME: &str = r#"{"result":null,"fuelUsed":0,"error":{"kind":"abandoned","message":"The instance resuming this run stopped before it finished (its lease ran out). The approved calls may have run; the run is not resumed again: start a new run"}}"#;

/// Bytes in a run id (128 bits, shown as 32 hex digits).
pub const RUN_ID_BYTES: usize = 16;

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Waiting for decisions.
    Suspended,
    /// Claimed by an instance that is resuming it.
    Running,
    /// Finished: the record holds its outcome.
    Done,
    /// Suspended past its expiry: it cannot be resumed.
    Expired,
}

impl RunStatus {
    /// The name used in the API and in the database (`expired` is never stored).
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Suspended => "suspended",
            RunStatus::Running => "running",
            RunStatus::Done => "done",
            RunStatus::Expired => "expired",
        }
    }

    /// Reads [`RunStatus::name`].
    pub fn parse(s: &str) -> Option<RunStatus> {
        match s {
            "suspended" => Some(RunStatus::Suspended),
            "running" => Some(RunStatus::Running),
            "done" => Some(RunStatus::Done),
            "expired" => Some(RunStatus::Expired),
            _ => None,
        }
    }

    /// The status a stored `(status, expires_ms)` reads as at `now_ms`.
    fn effective(stored: &str, expires_ms: i64, now_ms: i64) -> RunStatus {
        match RunStatus::parse(stored) {
            Some(RunStatus::Suspended) if expires_ms <= now_ms => RunStatus::Expired,
            Some(s) => s,
            None => RunStatus::Done,
        }
    }
}

/// A run about to be saved as suspended.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// Its id ([`new_run_id`]).
    pub id: String,
    /// The sealed bundle (artifact, policies, settings, snapshot).
    pub bundle: Vec<u8>,
    /// The pending calls, as JSON.
    pub pending: String,
    /// When it was created (ms since the Unix epoch).
    pub created_ms: i64,
    /// When it stops being resumable (ms since the Unix epoch).
    pub expires_ms: i64,
}

/// A stored run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// Its id.
    pub id: String,
    /// Where it is, as of the `now_ms` it was read at.
    pub status: RunStatus,
    /// The sealed bundle of its last suspension.
    pub bundle: Vec<u8>,
    /// The pending calls (JSON) while suspended.
    pub pending: Option<String>,
    /// The outcome (JSON) once done.
    pub outcome: Option<String>,
    /// The journal's bytes once done.
    pub journal: Option<Vec<u8>>,
    /// Bumped by every transition; a claim names the version it decided on.
    pub version: i64,
    /// When it was created (ms since the Unix epoch).
    pub created_ms: i64,
    /// When it expires (suspended) or is deleted, less the grace (done).
    pub expires_ms: i64,
    /// Until when its claimant holds it (running).
    pub claimed_until_ms: Option<i64>,
}

/// A run in a listing (no bundle, no journal).
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// Its id.
    pub id: String,
    /// Where it is.
    pub status: RunStatus,
    /// The pending calls (JSON) while suspended.
    pub pending: Option<String>,
    /// When it was created (ms since the Unix epoch).
    pub created_ms: i64,
    /// When it expires (ms since the Unix epoch).
    pub expires_ms: i64,
}

/// How a claimed run ends its claim.
#[derive(Clone, Debug, PartialEq)]
pub enum Completion {
    /// It finished: keep the outcome and journal until `keep_until_ms` (then the grace).
    Done {
        /// The outcome, as JSON.
        outcome: String,
        /// The journal's bytes.
        journal: Option<Vec<u8>>,
        /// When the record expires.
        keep_until_ms: i64,
    },
    /// It stopped for decisions again.
    Suspended {
        /// The new sealed bundle.
        bundle: Vec<u8>,
        /// The new pending calls, as JSON.
        pending: String,
        /// When it stops being resumable.
        expires_ms: i64,
    },
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Running records whose lease ran out, now done with [`ABANDONED_OUTCOME`].
    pub abandoned: u64,
    /// Records deleted.
    pub purged: u64,
}

/// Why a store operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No run has this id (or it was purged).
    #[error("No run with this id (it never existed or was deleted after expiring)")]
    NotFound,
    /// The run was already claimed (decided) by someone else, or its version moved on.
    #[error("This run was already decided; GET /runs/{{runId}} shows where it is")]
    AlreadyDecided,
    /// The run is past its expiry.
    #[error("This run expired before it was decided; start a new run")]
    Expired,
    /// An id already in use (insert).
    #[error("A run with this id exists already")]
    Duplicate,
    /// The store specification is not usable.
    #[error("{0}")]
    Config(String),
    /// The database failed.
    #[error("run store: {0}")]
    Backend(String),
}

/// A store operation in flight.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where suspended runs are kept between their suspension and their decision; shared by every
/// instance that may receive the decision. Times are ms since the Unix epoch, given by the
/// caller (the instances' clocks should agree to well under a run's TTL).
pub trait RunStore: Send + Sync {
    /// A short name for logs and metrics (`memory`, `sqlite`, `postgres`).
    fn kind(&self) -> &'static str;

    /// Saves a new suspended run (version 1).
    fn insert(&self, run: NewRun) -> StoreFuture<'_, ()>;

    /// Reads a run, with its status as of `now_ms`.
    fn get<'a>(&'a self, id: &'a str, now_ms: i64) -> StoreFuture<'a, Option<RunRecord>>;

    /// Lists runs in `status` as of `now_ms`, oldest first, at most `limit`.
    fn list(
        &self,
        status: RunStatus,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<RunSummary>>;

    /// How many runs are in `status` as of `now_ms`.
    fn count(&self, status: RunStatus, now_ms: i64) -> StoreFuture<'_, u64>;

    /// Claims a suspended run exactly once: `suspended` at `version` and not expired becomes
    /// `running` until `lease_until_ms`. Answers the claimed record's new version.
    ///
    /// Errors: [`StoreError::AlreadyDecided`] when another claim won or the version moved on,
    /// [`StoreError::Expired`], [`StoreError::NotFound`].
    fn claim<'a>(
        &'a self,
        id: &'a str,
        version: i64,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> StoreFuture<'a, i64>;

    /// Ends a claim made at `version` (the one [`RunStore::claim`] answered); the record is then
    /// at `version + 1` (a sealed suspension names the version it is stored at).
    ///
    /// Errors: [`StoreError::AlreadyDecided`] when the claim is no longer held (its lease ran
    /// out and a sweep marked the run abandoned).
    fn complete<'a>(&'a self, id: &'a str, version: i64, end: Completion) -> StoreFuture<'a, ()>;

    /// Marks running records whose lease ended before `now_ms` abandoned and deletes records
    /// (not running) past their expiry by more than `grace_ms`.
    fn sweep(&self, now_ms: i64, grace_ms: i64) -> StoreFuture<'_, Sweep>;
}

/// A fresh, unguessable run id: 128 random bits from the operating system, in hex.
///
/// # Errors
/// [`StoreError::Backend`] when the system has no randomness to give.
pub fn new_run_id() -> Result<String, StoreError> {
    let mut b = [0u8; RUN_ID_BYTES];
    getrandom::getrandom(&mut b)
        .map_err(|e| StoreError::Backend(format!("no system randomness for a run id: {e}")))?;
    Ok(ajs_vm::hex(&b))
}

/// Whether `id` has the shape of a run id (checked before any lookup).
pub fn is_run_id(id: &str) -> bool {
    id.len() == 2 * RUN_ID_BYTES && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Opens the store named by `spec`: `memory:`, `sqlite:PATH` (feature `store-sqlite`) or
/// `postgres://…` / `postgresql://…` (feature `store-postgres`), creating or migrating its
/// schema.
///
/// # Errors
/// [`StoreError::Config`] for a specification this build cannot open (naming what to write
/// instead), [`StoreError::Backend`] when the database cannot be reached or migrated.
pub async fn open(spec: &str) -> Result<Arc<dyn RunStore>, StoreError> {
    if spec == "memory:" {
        return Ok(Arc::new(MemoryRunStore::default()));
    }
    if let Some(path) = spec.strip_prefix("sqlite:") {
        #[cfg(feature = "store-sqlite")]
        return Ok(Arc::new(SqliteRunStore::open(path).await?));
        #[cfg(not(feature = "store-sqlite"))]
        return Err(StoreError::Config(format!(
            "store '{spec}': this build has no SQLite store (the ajs feature `store-sqlite`); {}",
            if path.is_empty() {
                ""
            } else {
                "build with it or use another store"
            }
        )));
    }
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        #[cfg(feature = "store-postgres")]
        return Ok(Arc::new(PostgresRunStore::connect(spec).await?));
        #[cfg(not(feature = "store-postgres"))]
        return Err(StoreError::Config(
            "store 'postgres://…': this build has no PostgreSQL store (the ajs feature `store-postgres`); build with it or use sqlite:PATH".into(),
        ));
    }
    Err(StoreError::Config(format!(
        "store '{}': unknown kind; write sqlite:PATH, postgres://user@host/db?sslmode=require or memory:",
        spec.chars().take(40).collect::<String>()
    )))
}

/// A store in this process's memory: for tests and single-process embedders (nothing survives
/// the process).
#[derive(Debug, Default)]
pub struct MemoryRunStore {
    runs: Mutex<HashMap<String, Stored>>,
}

#[derive(Clone, Debug)]
struct Stored {
    status: &'static str,
    bundle: Vec<u8>,
    pending: Option<String>,
    outcome: Option<String>,
    journal: Option<Vec<u8>>,
    version: i64,
    created_ms: i64,
    expires_ms: i64,
    claimed_until_ms: Option<i64>,
}

impl MemoryRunStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Stored>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn ready<'a, T: Send + 'a>(r: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(r))
}

impl RunStore for MemoryRunStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn insert(&self, run: NewRun) -> StoreFuture<'_, ()> {
        let mut runs = self.lock();
        if runs.contains_key(&run.id) {
            return ready(Err(StoreError::Duplicate));
        }
        runs.insert(
            run.id,
            Stored {
                status: "suspended",
                bundle: run.bundle,
                pending: Some(run.pending),
                outcome: None,
                journal: None,
                version: 1,
                created_ms: run.created_ms,
                expires_ms: run.expires_ms,
                claimed_until_ms: None,
            },
        );
        ready(Ok(()))
    }

    fn get<'a>(&'a self, id: &'a str, now_ms: i64) -> StoreFuture<'a, Option<RunRecord>> {
        let r = self.lock().get(id).map(|s| RunRecord {
            id: id.to_string(),
            status: RunStatus::effective(s.status, s.expires_ms, now_ms),
            bundle: s.bundle.clone(),
            pending: s.pending.clone(),
            outcome: s.outcome.clone(),
            journal: s.journal.clone(),
            version: s.version,
            created_ms: s.created_ms,
            expires_ms: s.expires_ms,
            claimed_until_ms: s.claimed_until_ms,
        });
        ready(Ok(r))
    }

    fn list(
        &self,
        status: RunStatus,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<RunSummary>> {
        let mut out: Vec<RunSummary> = self
            .lock()
            .iter()
            .filter(|(_, s)| RunStatus::effective(s.status, s.expires_ms, now_ms) == status)
            .map(|(id, s)| RunSummary {
                id: id.clone(),
                status,
                pending: s.pending.clone(),
                created_ms: s.created_ms,
                expires_ms: s.expires_ms,
            })
            .collect();
        out.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        out.truncate(limit);
        ready(Ok(out))
    }

    fn count(&self, status: RunStatus, now_ms: i64) -> StoreFuture<'_, u64> {
        let n = self
            .lock()
            .values()
            .filter(|s| RunStatus::effective(s.status, s.expires_ms, now_ms) == status)
            .count();
        ready(Ok(n as u64))
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        version: i64,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> StoreFuture<'a, i64> {
        let mut runs = self.lock();
        let Some(s) = runs.get_mut(id) else {
            return ready(Err(StoreError::NotFound));
        };
        let r = if s.status != "suspended" || s.version != version {
            Err(StoreError::AlreadyDecided)
        } else if s.expires_ms <= now_ms {
            Err(StoreError::Expired)
        } else {
            s.status = "running";
            s.version += 1;
            s.claimed_until_ms = Some(lease_until_ms);
            Ok(s.version)
        };
        ready(r)
    }

    fn complete<'a>(&'a self, id: &'a str, version: i64, end: Completion) -> StoreFuture<'a, ()> {
        let mut runs = self.lock();
        let Some(s) = runs.get_mut(id) else {
            return ready(Err(StoreError::NotFound));
        };
        if s.status != "running" || s.version != version {
            return ready(Err(StoreError::AlreadyDecided));
        }
        s.version += 1;
        s.claimed_until_ms = None;
        match end {
            Completion::Done {
                outcome,
                journal,
                keep_until_ms,
            } => {
                s.status = "done";
                s.pending = None;
                s.outcome = Some(outcome);
                s.journal = journal;
                s.expires_ms = keep_until_ms;
            }
            Completion::Suspended {
                bundle,
                pending,
                expires_ms,
            } => {
                s.status = "suspended";
                s.bundle = bundle;
                s.pending = Some(pending);
                s.expires_ms = expires_ms;
            }
        }
        ready(Ok(()))
    }

    fn sweep(&self, now_ms: i64, grace_ms: i64) -> StoreFuture<'_, Sweep> {
        let mut runs = self.lock();
        let mut sweep = Sweep::default();
        for s in runs.values_mut() {
            if s.status == "running" && s.claimed_until_ms.is_some_and(|t| t < now_ms) {
                s.status = "done";
                s.version += 1;
                s.pending = None;
                s.outcome = Some(ABANDONED_OUTCOME.into());
                s.claimed_until_ms = None;
                s.expires_ms = now_ms;
                sweep.abandoned += 1;
            }
        }
        let before = runs.len();
        runs.retain(|_, s| {
            s.status == "running" || s.expires_ms.saturating_add(grace_ms) >= now_ms
        });
        sweep.purged = (before - runs.len()) as u64;
        ready(Ok(sweep))
    }
}

/// The checks every store passes (run by the unit tests on each backend built).
#[cfg(test)]
pub(crate) mod conformance;
