//! The fleet store: PostgreSQL through tokio-postgres, shared by every `ajs serve` instance.
//!
//! TLS follows the URL's `sslmode`: `require` (the default when the URL names none),
//! `verify-ca` and `verify-full` all mean TLS with the server's certificate and host name
//! verified by rustls (ring) against the webpki (Mozilla) roots, or against the PEM file named by
//! `sslrootcert=PATH`; `disable` means no TLS (a database on loopback or a private link only).
//! `prefer` and `allow` are refused: a network attacker could strip TLS from them.
//!
//! Exactly-once claims: the claim is one `UPDATE … WHERE id = $1 AND status = 'suspended' AND
//! version = $2 AND expires_ms > $3`, a transaction of its own. A concurrent claim of the same
//! row waits for the first's row lock and re-checks the condition against the committed row, so
//! one claim updates it and every other updates nothing.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::RwLock;
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{
    Completion, NewRun, RunRecord, RunStatus, RunStore, RunSummary, StoreError, StoreFuture, Sweep,
    ABANDONED_OUTCOME,
};

/// Longest wait for a connection to the database (when the URL sets no `connect_timeout`).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Serialises migrations between instances starting at once (`pg_advisory_xact_lock`).
const MIGRATION_LOCK: i64 = 0x616a_735f_7275_6e73; // "ajs_runs"

/// The schema, one migration per version (applied in order, each once, in one transaction).
const MIGRATIONS: &[&str] = &["CREATE TABLE ajs_runs (
        id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        bundle BYTEA NOT NULL,
        pending TEXT,
        outcome TEXT,
        journal BYTEA,
        version BIGINT NOT NULL,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL,
        claimed_until_ms BIGINT
    );
    CREATE INDEX ajs_runs_by_status ON ajs_runs (status, created_ms);"];

/// A [`RunStore`] in a PostgreSQL database.
pub struct PostgresRunStore {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    client: RwLock<Arc<Client>>,
}

impl std::fmt::Debug for PostgresRunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresRunStore")
            .field("hosts", &self.config.get_hosts())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("postgres: {e}"))
}

/// The URL without its `sslmode` and `sslrootcert` parameters, and those two.
fn split_tls_params(url: &str) -> (String, Option<String>, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None, None);
    };
    let (mut mode, mut root) = (None, None);
    let mut kept = Vec::new();
    for p in query.split('&') {
        match p.split_once('=') {
            Some(("sslmode", v)) => mode = Some(v.to_string()),
            Some(("sslrootcert", v)) => root = Some(v.to_string()),
            _ => kept.push(p),
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, mode, root)
}

fn tls_connector(root: Option<&str>) -> Result<MakeRustlsConnect, StoreError> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match root {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(path)
                .map_err(|e| StoreError::Config(format!("store: sslrootcert {path}: {e}")))?;
            for c in certs {
                let c =
                    c.map_err(|e| StoreError::Config(format!("store: sslrootcert {path}: {e}")))?;
                roots
                    .add(c)
                    .map_err(|e| StoreError::Config(format!("store: sslrootcert {path}: {e}")))?;
            }
        }
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(backend)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(MakeRustlsConnect::new(cfg))
}

impl PostgresRunStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db?sslmode=…`)
    /// and brings its schema up to date.
    ///
    /// # Errors
    /// [`StoreError::Config`] for a URL that cannot be used (an unsupported `sslmode` among
    /// them), [`StoreError::Backend`] when the database cannot be reached or migrated.
    pub async fn connect(url: &str) -> Result<PostgresRunStore, StoreError> {
        let (rest, mode, root) = split_tls_params(url);
        let mut config = Config::from_str(&rest).map_err(|e| {
            StoreError::Config(format!(
                "store: not a usable postgres:// URL ({e}); write postgres://user:password@host:5432/db?sslmode=require"
            ))
        })?;
        let tls = match mode.as_deref().unwrap_or("require") {
            "disable" => None,
            "require" | "verify-ca" | "verify-full" => Some(tls_connector(root.as_deref())?),
            other => {
                return Err(StoreError::Config(format!(
                    "store: sslmode={other} is not supported; write sslmode=require (TLS, certificate verified) or sslmode=disable (loopback or a private link only)"
                )))
            }
        };
        config.ssl_mode(if tls.is_some() {
            SslMode::Require
        } else {
            SslMode::Disable
        });
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let mut client = open_client(&config, tls.as_ref()).await?;
        migrate(&mut client).await?;
        Ok(PostgresRunStore {
            config,
            tls,
            client: RwLock::new(Arc::new(client)),
        })
    }

    /// The connection, reopened if the database closed it.
    async fn client(&self) -> Result<Arc<Client>, StoreError> {
        {
            let c = self.client.read().await;
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let mut c = self.client.write().await;
        if c.is_closed() {
            *c = Arc::new(open_client(&self.config, self.tls.as_ref()).await?);
        }
        Ok(c.clone())
    }
}

async fn open_client(
    config: &Config,
    tls: Option<&MakeRustlsConnect>,
) -> Result<Client, StoreError> {
    let hint = |e: tokio_postgres::Error| {
        let tls_hint = if tls.is_some() {
            " (TLS is required: sslmode=require is the default; a database without TLS on loopback needs sslmode=disable)"
        } else {
            ""
        };
        backend(format!("cannot connect: {e}{tls_hint}"))
    };
    match tls {
        None => {
            let (client, conn) = config.connect(NoTls).await.map_err(hint)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(client)
        }
        Some(tls) => {
            let (client, conn) = config.connect(tls.clone()).await.map_err(hint)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(client)
        }
    }
}

/// Applies the migrations the database lacks, under an advisory lock so that instances
/// starting at once apply each exactly once.
async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(backend)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(backend)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS ajs_schema_version (version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL)",
    )
    .await
    .map_err(backend)?;
    let have: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::BIGINT FROM ajs_schema_version",
            &[],
        )
        .await
        .map_err(backend)?
        .get(0);
    if have > MIGRATIONS.len() as i64 {
        return Err(StoreError::Backend(format!(
            "postgres: the database's schema is version {have}, newer than this build's {}: run a newer ajs",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(have as usize) {
        tx.batch_execute(sql).await.map_err(backend)?;
        tx.execute(
            "INSERT INTO ajs_schema_version (version, applied_ms) VALUES ($1, $2)",
            &[&(i as i64 + 1), &super::now_ms()],
        )
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}

/// The stored status and expiry condition that read as `status` at `$1`.
fn status_filter(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Suspended => "status = 'suspended' AND expires_ms > $1",
        RunStatus::Expired => "status = 'suspended' AND expires_ms <= $1",
        RunStatus::Running => "status = 'running' AND $1::BIGINT IS NOT NULL",
        RunStatus::Done => "status = 'done' AND $1::BIGINT IS NOT NULL",
    }
}

impl RunStore for PostgresRunStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn insert(&self, run: NewRun) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let c = self.client().await?;
            c.execute(
                "INSERT INTO ajs_runs (id, status, bundle, pending, version, created_ms, expires_ms)
                 VALUES ($1, 'suspended', $2, $3, 1, $4, $5)",
                &[&run.id, &run.bundle, &run.pending, &run.created_ms, &run.expires_ms],
            )
            .await
            .map_err(|e| {
                if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                    StoreError::Duplicate
                } else {
                    backend(e)
                }
            })?;
            Ok(())
        })
    }

    fn get<'a>(&'a self, id: &'a str, now_ms: i64) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move {
            let c = self.client().await?;
            let row = c
                .query_opt(
                    "SELECT id, status, bundle, pending, outcome, journal, version, created_ms, expires_ms, claimed_until_ms
                     FROM ajs_runs WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(backend)?;
            Ok(row.map(|r| {
                let status: String = r.get(1);
                let expires_ms: i64 = r.get(8);
                RunRecord {
                    id: r.get(0),
                    status: RunStatus::effective(&status, expires_ms, now_ms),
                    bundle: r.get(2),
                    pending: r.get(3),
                    outcome: r.get(4),
                    journal: r.get(5),
                    version: r.get(6),
                    created_ms: r.get(7),
                    expires_ms,
                    claimed_until_ms: r.get(9),
                }
            }))
        })
    }

    fn list(
        &self,
        status: RunStatus,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<RunSummary>> {
        Box::pin(async move {
            let c = self.client().await?;
            let sql = format!(
                "SELECT id, pending, created_ms, expires_ms FROM ajs_runs WHERE {}
                 ORDER BY created_ms, id LIMIT $2",
                status_filter(status)
            );
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = c.query(&sql, &[&now_ms, &limit]).await.map_err(backend)?;
            Ok(rows
                .iter()
                .map(|r| RunSummary {
                    id: r.get(0),
                    status,
                    pending: r.get(1),
                    created_ms: r.get(2),
                    expires_ms: r.get(3),
                })
                .collect())
        })
    }

    fn count(&self, status: RunStatus, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let c = self.client().await?;
            let sql = format!(
                "SELECT COUNT(*)::BIGINT FROM ajs_runs WHERE {}",
                status_filter(status)
            );
            let n: i64 = c.query_one(&sql, &[&now_ms]).await.map_err(backend)?.get(0);
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
        Box::pin(async move {
            let c = self.client().await?;
            let won = c
                .execute(
                    "UPDATE ajs_runs SET status = 'running', version = version + 1, claimed_until_ms = $4
                     WHERE id = $1 AND status = 'suspended' AND version = $2 AND expires_ms > $3",
                    &[&id, &version, &now_ms, &lease_until_ms],
                )
                .await
                .map_err(backend)?;
            if won == 1 {
                return Ok(version + 1);
            }
            let row = c
                .query_opt(
                    "SELECT status, version, expires_ms FROM ajs_runs WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(backend)?;
            Err(match row {
                None => StoreError::NotFound,
                Some(r) => {
                    let (s, v, e): (String, i64, i64) = (r.get(0), r.get(1), r.get(2));
                    if s == "suspended" && v == version && e <= now_ms {
                        StoreError::Expired
                    } else {
                        StoreError::AlreadyDecided
                    }
                }
            })
        })
    }

    fn complete<'a>(&'a self, id: &'a str, version: i64, end: Completion) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let c = self.client().await?;
            let n = match end {
                Completion::Done {
                    outcome,
                    journal,
                    keep_until_ms,
                } => c.execute(
                    "UPDATE ajs_runs SET status = 'done', version = version + 1, pending = NULL,
                     outcome = $3, journal = $4, expires_ms = $5, claimed_until_ms = NULL
                     WHERE id = $1 AND status = 'running' AND version = $2",
                    &[&id, &version, &outcome, &journal, &keep_until_ms],
                )
                .await,
                Completion::Suspended {
                    bundle,
                    pending,
                    expires_ms,
                } => c.execute(
                    "UPDATE ajs_runs SET status = 'suspended', version = version + 1, bundle = $3,
                     pending = $4, expires_ms = $5, claimed_until_ms = NULL
                     WHERE id = $1 AND status = 'running' AND version = $2",
                    &[&id, &version, &bundle, &pending, &expires_ms],
                )
                .await,
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
        Box::pin(async move {
            let c = self.client().await?;
            let abandoned = c
                .execute(
                    "UPDATE ajs_runs SET status = 'done', version = version + 1, pending = NULL,
                     outcome = $2, expires_ms = $1, claimed_until_ms = NULL
                     WHERE status = 'running' AND claimed_until_ms < $1",
                    &[&now_ms, &ABANDONED_OUTCOME],
                )
                .await
                .map_err(backend)?;
            let cutoff = now_ms.saturating_sub(grace_ms);
            let purged = c
                .execute(
                    "DELETE FROM ajs_runs WHERE status <> 'running' AND expires_ms < $1",
                    &[&cutoff],
                )
                .await
                .map_err(backend)?;
            Ok(Sweep { abandoned, purged })
        })
    }
}
