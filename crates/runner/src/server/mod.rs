//! The HTTP endpoint over hyper 1: `POST /run` (stateless between requests), `GET /healthz`,
//! `GET /metrics`. Modules by concern: `routes` (the route table and the checks every request
//! passes), `run` (`POST /run`), [`cors`] (`Origin` and `cors.origins`), [`metrics`], and
//! `reply` (the answer shapes).
//!
//! Request (JSON, sent with `Content-Type: application/json`): `{ "artifact": base64 |
//! "source": text, "spans"?: base64, "args"?: {…}, "options"?: { "fuel"?, "timeoutMs"? },
//! "log"?: bool }`. Answers:
//! - `200` with the outcome (see [`crate::output::outcome_json`]) whenever the program ran or its
//!   arguments were refused by its signature;
//! - `400` for a request that cannot run (malformed JSON or base64, an artifact the verifier
//!   refuses, an atom the server does not provide, options out of range, source not accepted),
//!   `403` (an `Origin` not listed in `cors.origins`), `404`, `405`, `413` (body over
//!   `limits.maxRequestBytes`), `415` (a `POST` body not declared `application/json`), `503`
//!   (already `limits.maxConcurrentRuns` runs in flight), each with `{ "error": { "kind",
//!   "message" } }`.
//!
//! The incoming `X-Agent-Depth` becomes the run's depth; the guest's own requests carry
//! depth + 1 and are refused from depth 10 on.
//!
//! Guest code (loading, compiling, running, rendering the outcome) runs on a runtime of its own,
//! `limits.runThreads` threads, never on the threads that accept connections and read requests:
//! however hard every run slot computes, `GET /healthz` and request I/O keep their threads.

pub mod cors;
pub mod metrics;
pub(crate) mod reply;
mod routes;
pub(crate) mod run;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ajs::Options;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
use crate::runs::Runs;
use metrics::Metrics;
use reply::{Note, Reply};

/// The header carrying the agent depth.
pub const DEPTH_HEADER: &str = "x-agent-depth";

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    state: Arc<State>,
}

/// What every request handler shares.
pub(crate) struct State {
    pub(crate) config: ServerConfig,
    /// The options a run starts from.
    pub(crate) options: Options,
    /// The run slots (`limits.maxConcurrentRuns`).
    pub(crate) runs: Arc<Semaphore>,
    pub(crate) pool: RunPool,
    pub(crate) metrics: Arc<Metrics>,
    /// Approvals, when `[approvals]` is configured.
    pub(crate) approvals: Option<Arc<Runs>>,
}

/// The runtime that runs guest code, apart from the one serving connections.
pub(crate) struct RunPool(Option<tokio::runtime::Runtime>);

impl RunPool {
    fn new(threads: usize) -> Result<RunPool, String> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("ajs-run")
            .enable_all()
            .build()
            .map(|rt| RunPool(Some(rt)))
            .map_err(|e| format!("cannot start the run threads: {e}"))
    }

    /// Runs `f` on the pool (`None` once the server is stopping). Dropping the handle does not
    /// stop `f`: a run ends through its cancellation token, so that it is counted.
    pub(crate) fn spawn<F>(&self, f: F) -> Option<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.as_ref().map(|rt| rt.spawn(f))
    }
}

impl Drop for RunPool {
    // dropped wherever the last request ends, possibly inside the serving runtime, where a
    // blocking shutdown would panic
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Server {
    /// Binds `config.listen`.
    ///
    /// # Errors
    /// The configuration is invalid, or the address cannot be bound.
    pub async fn bind(config: ServerConfig) -> Result<Server, String> {
        config.check()?;
        let listener = TcpListener::bind(&config.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let options = config.base_options();
        let runs = Arc::new(Semaphore::new(config.limits.max_concurrent_runs));
        let pool = RunPool::new(config.run_threads())?;
        let metrics = Arc::new(Metrics::default());
        let approvals = match &config.approvals {
            Some(a) => Some(Arc::new(Runs::open(a, metrics.clone()).await?)),
            None => None,
        };
        Ok(Server {
            listener,
            state: Arc::new(State {
                config,
                options,
                runs,
                pool,
                metrics,
                approvals,
            }),
        })
    }

    /// The address actually bound (useful with port 0).
    ///
    /// # Panics
    /// Never in practice: a bound TCP listener has a local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("bound listener")
    }

    /// Serves until `shutdown` completes, then stops accepting (new connections are refused),
    /// lets in-flight requests finish within `limits.shutdownGraceMs` and returns.
    pub async fn run<F: Future<Output = ()>>(self, shutdown: F) {
        let graceful = GracefulShutdown::new();
        let sweeper = self.state.approvals.as_ref().map(Runs::spawn_sweeper);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                r = self.listener.accept() => {
                    let stream = match r {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    let state = self.state.clone();
                    let svc = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(state, req).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(30))
                        .serve_connection(TokioIo::new(stream), svc);
                    let conn = graceful.watch(conn);
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                }
                () = &mut shutdown => break,
            }
        }
        drop(self.listener);
        if let Some(s) = sweeper {
            s.abort();
        }
        let grace = Duration::from_millis(self.state.config.limits.shutdown_grace_ms);
        tracing::info!(
            grace_ms = grace.as_millis() as u64,
            "shutting down: finishing in-flight requests"
        );
        tokio::select! {
            () = graceful.shutdown() => tracing::info!("shut down"),
            () = tokio::time::sleep(grace) => tracing::warn!("shutdown grace period over; dropping the requests still running"),
        }
    }
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Reply {
    let start = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut note = Note::default();
    let resp = routes::route(state, req, &mut note).await;
    let status = resp.status().as_u16();
    let duration_ms = (start.elapsed().as_secs_f64() * 1e6).round() / 1000.0;
    let fuel = note.fuel.unwrap_or(0.0);
    let error_kind = note.error_kind.unwrap_or("");
    tracing::info!(
        method = %method,
        path = %path,
        status,
        fuel,
        duration_ms,
        depth = note.depth,
        error_kind,
        "request"
    );
    resp
}
