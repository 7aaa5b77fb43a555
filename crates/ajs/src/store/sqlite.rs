//! The embedded store: one SQLite file (WAL, `synchronous=FULL`: a committed transition
//! survives a crash of the process or the machine). Several processes may share the file (a
//! writer waits up to [`BUSY_TIMEOUT`] for another's lock); every call runs on tokio's blocking
//! threads.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{
    Completion, NewRun, RunRecord, RunStatus, RunStore, RunSummary, StoreError, StoreFuture, Sweep,
    ABANDONED_OUTCOME,
};

/// How long a write waits for another process's lock on the file before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema, one migration per version (applied in order, each once, in one transaction).
const MIGRATIONS: &[&str] = &["CREATE TABLE ajs_runs (
        id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        bundle BLOB NOT NULL,
        pending TEXT,
        outcome TEXT,
        journal BLOB,
        version INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        claimed_until_ms INTEGER
    );
    CREATE INDEX ajs_runs_by_status ON ajs_runs (status, created_ms);"];

/// A [`RunStore`] in a SQLite file.
#[derive(Clone, Debug)]
pub struct SqliteRunStore {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("sqlite: {e}"))
}

impl SqliteRunStore {
    /// Opens (creating if missing) the file at `path` and brings its schema up to date.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the file cannot be opened or migrated.
    pub async fn open(path: &str) -> Result<SqliteRunStore, StoreError> {
        if path.is_empty() {
            return Err(StoreError::Config(
                "store 'sqlite:': name the file, e.g. sqlite:ajs-runs.db".into(),
            ));
        }
        let path = PathBuf::from(path);
        let p = path.clone();
        let conn = tokio::task::spawn_blocking(move || -> Result<Connection, StoreError> {
            let mut c = Connection::open(&p)
                .map_err(|e| backend(format!("cannot open {}: {e}", p.display())))?;
            c.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
            c.pragma_update(None, "journal_mode", "WAL")
                .map_err(backend)?;
            c.pragma_update(None, "synchronous", "FULL")
                .map_err(backend)?;
            migrate(&mut c)?;
            Ok(c)
        })
        .await
        .map_err(backend)??;
        Ok(SqliteRunStore {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// The file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn call<T, F>(&self, f: F) -> StoreFuture<'static, T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let conn = self.conn.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut c = conn.lock().unwrap_or_else(|p| p.into_inner());
                f(&mut c)
            })
            .await
            .map_err(backend)?
        })
    }
}

/// Applies the migrations the file lacks; a second process doing the same waits for the write
/// lock (`BEGIN IMMEDIATE`) and then finds nothing to do.
fn migrate(c: &mut Connection) -> Result<(), StoreError> {
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS ajs_schema_version (version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL)",
    )
    .map_err(backend)?;
    let have: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM ajs_schema_version",
            [],
            |r| r.get(0),
        )
        .map_err(backend)?;
    if have > MIGRATIONS.len() as i64 {
        return Err(StoreError::Backend(format!(
            "sqlite: the database's schema is version {have}, newer than this build's {}: run a newer ajs",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(have as usize) {
        tx.execute_batch(sql).map_err(backend)?;
        tx.execute(
            "INSERT INTO ajs_schema_version (version, applied_ms) VALUES (?1, ?2)",
            params![i as i64 + 1, super::now_ms()],
        )
        .map_err(backend)?;
    }
    tx.commit().map_err(backend)
}

fn record(r: &rusqlite::Row<'_>, now_ms: i64) -> rusqlite::Result<RunRecord> {
    let status: String = r.get(1)?;
    let expires_ms: i64 = r.get(8)?;
    Ok(RunRecord {
        id: r.get(0)?,
        status: RunStatus::effective(&status, expires_ms, now_ms),
        bundle: r.get(2)?,
        pending: r.get(3)?,
        outcome: r.get(4)?,
        journal: r.get(5)?,
        version: r.get(6)?,
        created_ms: r.get(7)?,
        expires_ms,
        claimed_until_ms: r.get(9)?,
    })
}

/// The stored status and expiry condition that read as `status` at `?1`.
fn status_filter(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Suspended => "status = 'suspended' AND expires_ms > ?1",
        RunStatus::Expired => "status = 'suspended' AND expires_ms <= ?1",
        RunStatus::Running => "status = 'running' AND ?1 = ?1",
        RunStatus::Done => "status = 'done' AND ?1 = ?1",
    }
}

impl RunStore for SqliteRunStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn insert(&self, run: NewRun) -> StoreFuture<'_, ()> {
        self.call(move |c| {
            c.execute(
                "INSERT INTO ajs_runs (id, status, bundle, pending, version, created_ms, expires_ms)
                 VALUES (?1, 'suspended', ?2, ?3, 1, ?4, ?5)",
                params![run.id, run.bundle, run.pending, run.created_ms, run.expires_ms],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Duplicate
                }
                e => backend(e),
            })?;
            Ok(())
        })
    }

    fn get<'a>(&'a self, id: &'a str, now_ms: i64) -> StoreFuture<'a, Option<RunRecord>> {
        let id = id.to_string();
        self.call(move |c| {
            c.query_row(
                "SELECT id, status, bundle, pending, outcome, journal, version, created_ms, expires_ms, claimed_until_ms
                 FROM ajs_runs WHERE id = ?1",
                params![id],
                |r| record(r, now_ms),
            )
            .optional()
            .map_err(backend)
        })
    }

    fn list(
        &self,
        status: RunStatus,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<RunSummary>> {
        self.call(move |c| {
            let sql = format!(
                "SELECT id, pending, created_ms, expires_ms FROM ajs_runs WHERE {}
                 ORDER BY created_ms, id LIMIT ?2",
                status_filter(status)
            );
            let mut st = c.prepare(&sql).map_err(backend)?;
            let rows = st
                .query_map(params![now_ms, limit as i64], |r| {
                    Ok(RunSummary {
                        id: r.get(0)?,
                        status,
                        pending: r.get(1)?,
                        created_ms: r.get(2)?,
                        expires_ms: r.get(3)?,
                    })
                })
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
    }

    fn count(&self, status: RunStatus, now_ms: i64) -> StoreFuture<'_, u64> {
        self.call(move |c| {
            let sql = format!(
                "SELECT COUNT(*) FROM ajs_runs WHERE {}",
                status_filter(status)
            );
            let n: i64 = c
                .query_row(&sql, params![now_ms], |r| r.get(0))
                .map_err(backend)?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        version: i64,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> StoreFuture<'a, i64> {
        let id = id.to_string();
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            let won = tx
                .execute(
                    "UPDATE ajs_runs SET status = 'running', version = version + 1, claimed_until_ms = ?4
                     WHERE id = ?1 AND status = 'suspended' AND version = ?2 AND expires_ms > ?3",
                    params![id, version, now_ms, lease_until_ms],
                )
                .map_err(backend)?;
            let why = if won == 1 {
                None
            } else {
                let row: Option<(String, i64, i64)> = tx
                    .query_row(
                        "SELECT status, version, expires_ms FROM ajs_runs WHERE id = ?1",
                        params![id],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()
                    .map_err(backend)?;
                Some(match row {
                    None => StoreError::NotFound,
                    Some((s, v, e)) if s == "suspended" && v == version && e <= now_ms => {
                        StoreError::Expired
                    }
                    Some(_) => StoreError::AlreadyDecided,
                })
            };
            tx.commit().map_err(backend)?;
            why.map_or(Ok(version + 1), Err)
        })
    }

    fn complete<'a>(&'a self, id: &'a str, version: i64, end: Completion) -> StoreFuture<'a, ()> {
        let id = id.to_string();
        self.call(move |c| {
            let n = match end {
                Completion::Done {
                    outcome,
                    journal,
                    keep_until_ms,
                } => c.execute(
                    "UPDATE ajs_runs SET status = 'done', version = version + 1, pending = NULL,
                     outcome = ?3, journal = ?4, expires_ms = ?5, claimed_until_ms = NULL
                     WHERE id = ?1 AND status = 'running' AND version = ?2",
                    params![id, version, outcome, journal, keep_until_ms],
                ),
                Completion::Suspended {
                    bundle,
                    pending,
                    expires_ms,
                } => c.execute(
                    "UPDATE ajs_runs SET status = 'suspended', version = version + 1, bundle = ?3,
                     pending = ?4, expires_ms = ?5, claimed_until_ms = NULL
                     WHERE id = ?1 AND status = 'running' AND version = ?2",
                    params![id, version, bundle, pending, expires_ms],
                ),
            }
            .map_err(backend)?;
            if n == 1 {
                Ok(())
            } else {
                Err(StoreError::AlreadyDecided)
            }
        })
    }

    fn sweep(&self, now_ms: i64, grace_ms: i64) -> StoreFuture<'_, Sweep> {
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            let abandoned = tx
                .execute(
                    "UPDATE ajs_runs SET status = 'done', version = version + 1, pending = NULL,
                     outcome = ?2, expires_ms = ?1, claimed_until_ms = NULL
                     WHERE status = 'running' AND claimed_until_ms < ?1",
                    params![now_ms, ABANDONED_OUTCOME],
                )
                .map_err(backend)?;
            let purged = tx
                .execute(
                    "DELETE FROM ajs_runs WHERE status <> 'running' AND expires_ms < ?1",
                    params![now_ms.saturating_sub(grace_ms)],
                )
                .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(Sweep {
                abandoned: abandoned as u64,
                purged: purged as u64,
            })
        })
    }
}
