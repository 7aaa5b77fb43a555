//! Typed host functions: a Rust closure or async fn over any serde types, registered as an atom,
//! with the run's context; and the serde conversions of [`JsValue`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use ajs_vm::JsValue;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::capabilities::{AtomDecl, Capabilities, QuotaLedger};

/// A conversion between a Rust value and a [`JsValue`] that failed (a type that does not match,
/// a map whose keys are not strings, …). The message is serde's.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(pub String);

/// Converts any `Serialize` value to a [`JsValue`] by JSON's data model (a struct is an object
/// in field order, a tuple or `Vec` an array, `None` and `()` are `null`, numbers are `f64`).
///
/// # Errors
/// [`ValueError`] when the value cannot be written as JSON data (a map with non-string keys).
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, ValueError> {
    serde_json::to_value(value)
        .map(|v| JsValue::from_json(&v))
        .map_err(|e| ValueError(e.to_string()))
}

/// Converts a [`JsValue`] to any `Deserialize` type, by `JSON.stringify`'s rules (`undefined` as
/// `null`, so an absent value fits an `Option`; `NaN` and infinities as `null`; an integral
/// number fits an integer type).
///
/// ```
/// #[derive(serde::Deserialize, serde::Serialize, Debug, PartialEq)]
/// struct Item { name: String, qty: u32 }
/// let v = ajs::to_value(&Item { name: "pen".into(), qty: 2 }).unwrap();
/// assert_eq!(v.to_json(), Some(serde_json::json!({ "name": "pen", "qty": 2 })));
/// assert_eq!(ajs::from_value::<Item>(&v).unwrap(), Item { name: "pen".into(), qty: 2 });
/// assert!(ajs::from_value::<Item>(&ajs::JsValue::Null).is_err());
/// ```
///
/// # Errors
/// [`ValueError`] naming what did not fit (`missing field `qty``, `invalid type: …`).
pub fn from_value<T: DeserializeOwned>(value: &JsValue) -> Result<T, ValueError> {
    let json = value.to_json().unwrap_or(serde_json::Value::Null);
    serde_json::from_value(json).map_err(|e| ValueError(e.to_string()))
}

/// The error a host function returns: the guest receives it as a catchable error whose message
/// is this one. Any `std::error::Error` converts into it (so `?` works in a host function).
#[derive(Clone, Debug, PartialEq)]
pub struct HostError {
    message: String,
}

impl HostError {
    /// An error with this message (what the guest's `catch (e)` receives).
    pub fn new(message: impl Into<String>) -> HostError {
        HostError {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for HostError {
    fn from(e: E) -> HostError {
        HostError::new(e.to_string())
    }
}

/// Source of run ids: unique within the process.
static NEXT_RUN_ID: AtomicU64 = AtomicU64::new(1);

/// A run's id, drawn when a host function first asks for it (a run that calls none draws none).
pub(crate) fn run_id(cell: &OnceLock<u64>) -> u64 {
    *cell.get_or_init(|| NEXT_RUN_ID.fetch_add(1, Ordering::Relaxed))
}

/// What a host function knows of the run that called it.
#[derive(Clone, Debug)]
pub struct HostContext {
    pub(crate) run_id: u64,
    pub(crate) atom: String,
    pub(crate) depth: u32,
    pub(crate) cancel: Option<CancellationToken>,
    pub(crate) quotas: Arc<HashMap<String, u32>>,
    pub(crate) ledger: Option<Arc<QuotaLedger>>,
}

tokio::task_local! {
    /// The context of the host call being performed (set by the driver around the call).
    static CONTEXT: HostContext;
}

impl HostContext {
    /// The context of the host call this future is performing: inside a host function (typed,
    /// or a closure given to [`Capabilities::register_atom`]), `Some`; elsewhere `None`.
    pub fn current() -> Option<HostContext> {
        CONTEXT.try_with(HostContext::clone).ok()
    }

    /// Runs `fut` with `self` as the current context.
    pub(crate) fn scope<F: Future>(self, fut: F) -> impl Future<Output = F::Output> {
        CONTEXT.scope(self, fut)
    }

    /// The run's id: unique within this process (a resumed run gets a new one).
    pub fn run_id(&self) -> u64 {
        self.run_id
    }

    /// The atom the guest called.
    pub fn atom(&self) -> &str {
        &self.atom
    }

    /// The run's agent depth (`Runner.depth`, the incoming `X-Agent-Depth`): a host function
    /// that starts another run passes `depth + 1`.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Whether the host cancelled the run (`Options.cancel`). A cancelled run drops the call's
    /// future at its next await; long synchronous work checks this.
    pub fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
    }

    /// The run's cancellation token, when it has one: hand it to a nested run
    /// (`Options.cancel`) so that cancelling this run cancels that one too.
    pub fn cancellation(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
    }

    /// The run's quota of calls for `atom` (`Runner.quotas`), if it has one.
    pub fn quota(&self, atom: &str) -> Option<u32> {
        self.quotas.get(atom).copied()
    }

    /// The run's quotas (`Runner.quotas`).
    pub fn quotas(&self) -> &HashMap<String, u32> {
        &self.quotas
    }

    /// The run's shared call counters (`Runner.ledger`), if it has them: give them (with
    /// [`HostContext::quotas`]) to a nested run so that it spends the same budget.
    pub fn ledger(&self) -> Option<&Arc<QuotaLedger>> {
        self.ledger.as_ref()
    }
}

/// The catchable message of an input that does not fit the host function's type.
fn bad_input(atom: &str, e: &ValueError) -> String {
    format!("{atom}: invalid input: {e}")
}

/// The catchable message of an answer the host function's type could not convert.
fn bad_output(atom: &str, e: &ValueError) -> String {
    format!("{atom}: its answer could not be converted: {e}")
}

impl Capabilities {
    /// Registers an async host function as the atom `decl.name`: the guest's input object is
    /// deserialized into `I`, the answer `O` serialized back; an `Err(HostError)` is a catchable
    /// guest error, and so is an input that does not fit `I`. The answer crosses the same
    /// admission as every atom's (`membraneMaxBytes`, depth, the run's heap). A panic in the
    /// function ends the run with [`ErrorKind::HostPanic`](crate::ErrorKind::HostPanic).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use ajs::{AtomDecl, Capabilities, Eval, HostContext, HostError, Options};
    /// #[derive(serde::Deserialize)]
    /// struct Query { sku: String }
    /// #[derive(serde::Serialize)]
    /// struct Price { sku: String, cents: u32 }
    ///
    /// let caps = Capabilities::default().host_fn(
    ///     AtomDecl::new("price"),
    ///     |_ctx: HostContext, q: Query| async move {
    ///         match q.sku.as_str() {
    ///             "A1" => Ok(Price { sku: q.sku, cents: 950 }),
    ///             _ => Err(HostError::new(format!("no such sku: {}", q.sku))),
    ///         }
    ///     },
    /// );
    /// let options = Options { capabilities: caps, ..Default::default() };
    /// let out = Eval::new("price({ sku: 'A1' }).cents * 2").options(options.clone()).run().await;
    /// assert_eq!(out.into_result().unwrap(), ajs::JsValue::Number(1900.0));
    /// let out = Eval::new("try { return price({ sku: 'B' }) } catch (e) { return e }")
    ///     .options(options).run().await;
    /// assert_eq!(out.result, ajs::JsValue::String("no such sku: B".into()));
    /// # });
    /// ```
    pub fn host_fn<I, O, F, Fut>(self, decl: AtomDecl, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(HostContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, HostError>> + Send + 'static,
    {
        let atom = decl.name.clone();
        let f = Arc::new(f);
        self.register_atom(decl, move |input: JsValue| {
            let f = f.clone();
            let atom = atom.clone();
            async move {
                let ctx = HostContext::current().ok_or("host function called outside a run")?;
                let input: I = from_value(&input).map_err(|e| bad_input(&atom, &e))?;
                let out = f(ctx, input).await.map_err(|e| e.message)?;
                to_value(&out).map_err(|e| bad_output(&atom, &e))
            }
        })
    }

    /// [`Capabilities::host_fn`] for a synchronous closure (it runs on the run's task: keep it
    /// short, or use the async form).
    ///
    /// ```
    /// use ajs::{AtomDecl, Capabilities, HostContext, HostError};
    /// let caps = Capabilities::default().host_fn_sync(
    ///     AtomDecl::new("add").fuel(0.5),
    ///     |_ctx: HostContext, (a, b): (f64, f64)| Ok::<_, HostError>(a + b),
    /// );
    /// assert!(caps.atom_names().contains(&"add".to_string()));
    /// ```
    pub fn host_fn_sync<I, O, F>(self, decl: AtomDecl, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(HostContext, I) -> Result<O, HostError> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.host_fn(decl, move |ctx, input: I| {
            let f = f.clone();
            async move { f(ctx, input) }
        })
    }
}
