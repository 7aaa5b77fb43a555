//! Capabilities: the host functions behind atoms. The only way a guest reaches the world.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ajs_vm::JsValue;

/// What a capability eventually answers: plain data, or the message of the error it threw
/// (which the guest may catch).
pub type HostFuture = Pin<Box<dyn Future<Output = Result<JsValue, String>> + Send + 'static>>;

/// A request as the `fetch` capability receives it (seed: `fetch(url, init)`).
#[derive(Clone, Debug, PartialEq)]
pub struct FetchCall {
    /// The URL.
    pub url: String,
    /// The method (upper case).
    pub method: String,
    /// Headers as the guest spelled them, plus `X-Agent-Depth`.
    pub headers: Vec<(String, String)>,
    /// The guest's body value, as data (not serialized).
    pub body: JsValue,
}

/// The `fetch` capability (behind `httpFetch`).
pub type FetchFn = Arc<dyn Fn(FetchCall) -> HostFuture + Send + Sync>;
/// The `llm` capability (behind `llmPredict`): prompt and the call's `options`.
pub type LlmFn = Arc<dyn Fn(String, JsValue) -> HostFuture + Send + Sync>;
/// A host atom: receives the guest's input object.
pub type AtomFn = Arc<dyn Fn(JsValue) -> HostFuture + Send + Sync>;

/// The capabilities a host injects. Empty by default: no way out.
#[derive(Clone, Default)]
pub struct Capabilities {
    /// Behind `httpFetch`.
    pub fetch: Option<FetchFn>,
    /// Behind `llmPredict`.
    pub llm: Option<LlmFn>,
    /// Host-registered atoms, by atom name.
    pub atoms: HashMap<String, AtomFn>,
}

impl std::fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("fetch", &self.fetch.is_some())
            .field("llm", &self.llm.is_some())
            .field("atoms", &self.atoms.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Capabilities {
    /// Sets the `fetch` capability from an async closure.
    pub fn with_fetch<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(FetchCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JsValue, String>> + Send + 'static,
    {
        self.fetch = Some(Arc::new(move |c| Box::pin(f(c))));
        self
    }

    /// Sets the `llm` capability from an async closure.
    pub fn with_llm<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(String, JsValue) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JsValue, String>> + Send + 'static,
    {
        self.llm = Some(Arc::new(move |p, o| Box::pin(f(p, o))));
        self
    }

    /// Registers a host atom from an async closure.
    pub fn with_atom<F, Fut>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(JsValue) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JsValue, String>> + Send + 'static,
    {
        self.atoms
            .insert(name.into(), Arc::new(move |v| Box::pin(f(v))));
        self
    }
}
