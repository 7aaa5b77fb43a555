//! Capabilities: the host functions behind atoms. The only way a guest reaches the world.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(feature = "http")]
use ajs_io::{HttpClient, LlmClient};
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
    /// The declarations (input shape, fuel, timeout) of host atoms, by name. An atom in
    /// [`Capabilities::atoms`] without a declaration here gets [`AtomDecl::new`]'s defaults.
    pub decls: HashMap<String, AtomDecl>,
    /// The built-in `httpFetch` client, used when `fetchPolicy.domains` is set and no `fetch`
    /// capability is: `None` means one trusting the public web roots (`webpki-roots`). Set it
    /// to trust a private CA (or a test's self-signed certificate). Its body cap is replaced by
    /// the run's `membrane_max_bytes`.
    #[cfg(feature = "http")]
    pub http_client: Option<HttpClient>,
    /// The built-in model client behind `llmPredict` ([`Capabilities::with_llm_client`]): the
    /// driver calls it itself, so its structured answers are parsed within the run's heap room.
    /// When set it is used instead of [`Capabilities::llm`].
    #[cfg(feature = "http")]
    pub llm_client: Option<Arc<LlmClient>>,
}

impl std::fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Capabilities");
        d.field("fetch", &self.fetch.is_some())
            .field("llm", &self.llm.is_some())
            .field("atoms", &self.atoms.keys().collect::<Vec<_>>());
        #[cfg(feature = "http")]
        d.field("http_client", &self.http_client)
            .field("llm_client", &self.llm_client.is_some());
        d.finish()
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
        #[cfg(feature = "http")]
        {
            self.llm_client = None;
        }
        self
    }

    /// Puts the built-in model client behind `llmPredict` (an OpenAI-compatible endpoint).
    #[cfg(feature = "http")]
    pub fn with_llm_client(self, client: LlmClient) -> Self {
        let client = Arc::new(client);
        let mut caps = {
            let client = client.clone();
            self.with_llm(move |prompt: String, options: JsValue| {
                let client = client.clone();
                async move {
                    let options = options.to_json();
                    client
                        .predict(&prompt, options.as_ref())
                        .await
                        .map(|v| JsValue::from_json(&v))
                }
            })
        };
        caps.llm_client = Some(client);
        caps
    }

    /// Sets the built-in `httpFetch` client (see [`Capabilities::http_client`]).
    #[cfg(feature = "http")]
    pub fn with_http_client(mut self, client: HttpClient) -> Self {
        self.http_client = Some(client);
        self
    }

    /// Registers a host atom from an async closure, with the defaults of [`AtomDecl::new`]
    /// (1 fuel, 30 s, any input).
    pub fn with_atom<F, Fut>(self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(JsValue) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JsValue, String>> + Send + 'static,
    {
        let name = name.into();
        self.register_atom(AtomDecl::new(name), f)
    }

    /// Registers a host atom with its declaration: input shape, fuel cost, timeout.
    ///
    /// ```
    /// use ajs::{AtomDecl, Capabilities, InputType, JsValue};
    /// use std::time::Duration;
    /// let caps = Capabilities::default().register_atom(
    ///     AtomDecl::new("lookup")
    ///         .required("id", InputType::Number)
    ///         .optional("fields", InputType::Array)
    ///         .fuel(2.0)
    ///         .timeout(Duration::from_secs(5)),
    ///     |input: JsValue| async move { Ok(input) },
    /// );
    /// assert_eq!(caps.decl("lookup").unwrap().fuel, 2.0);
    /// ```
    pub fn register_atom<F, Fut>(mut self, decl: AtomDecl, f: F) -> Self
    where
        F: Fn(JsValue) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JsValue, String>> + Send + 'static,
    {
        let name = decl.name.clone();
        self.atoms
            .insert(name.clone(), Arc::new(move |v| Box::pin(f(v))));
        self.decls.insert(name, decl);
        self
    }

    /// The declaration of an atom the code may call: the built-in `httpFetch` and `llmPredict`,
    /// or a registered host atom (declared, or with the defaults). `None` for an unknown name.
    pub fn decl(&self, name: &str) -> Option<AtomDecl> {
        match name {
            "httpFetch" => Some(AtomDecl::http_fetch()),
            "llmPredict" => {
                let mut d = AtomDecl::llm_predict();
                // a model client given more time than the atom raises the atom's own timeout
                if let Some(c) = &self.llm_client {
                    d.timeout = d.timeout.max(c.config().timeout);
                }
                Some(d)
            }
            _ => self.decls.get(name).cloned().or_else(|| {
                self.atoms
                    .contains_key(name)
                    .then(|| AtomDecl::new(name.to_string()))
            }),
        }
    }

    /// The inputs every atom declares, for the compile-time warnings (decision 39); with the
    /// built-in model client, also the `llmPredict` options it reads.
    #[cfg(feature = "compiler")]
    pub fn atom_inputs(&self) -> ajs_compiler::AtomInputs {
        let mut inputs = ajs_compiler::AtomInputs::default();
        for name in self.atom_names() {
            if let Some(d) = self.decl(&name) {
                let names: Vec<&str> = d.inputs.iter().map(|f| f.name.as_str()).collect();
                inputs.declare(&name, &names);
            }
        }
        if self.llm_client.is_some() {
            let members: Vec<&str> = ajs_io::llm::LLM_OPTIONS
                .iter()
                .flat_map(|(n, alias)| std::iter::once(*n).chain(alias.iter().copied()))
                .collect();
            inputs.declare_nested("llmPredict", "options", &members);
        }
        inputs
    }

    /// The run-time warnings (decision 29) for a call of `atom` with `input`: inputs it does
    /// not declare and, with the built-in model client, `llmPredict` options it does not read;
    /// at most `most` of them.
    pub(crate) fn input_warnings(&self, atom: &str, input: &JsValue, most: usize) -> Vec<String> {
        let (Some(decl), JsValue::Object(m)) = (self.decl(atom), input) else {
            return Vec::new();
        };
        let declared = |k: &String| decl.inputs.iter().any(|f| &f.name == k);
        let llm_options = atom == "llmPredict" && self.llm_client.is_some();
        // the common case (every input declared) allocates nothing
        if decl.inputs.is_empty() || (m.keys().all(declared) && !llm_options) {
            return Vec::new();
        }
        let known: Vec<String> = decl.inputs.iter().map(|f| f.name.clone()).collect();
        let mut out: Vec<String> = m
            .keys()
            .filter(|k| !known.contains(k))
            .take(most)
            .map(|k| unknown_input(atom, k, &known))
            .collect();
        if llm_options {
            if let Some(JsValue::Object(o)) = m.get("options") {
                let members: Vec<String> = ajs_io::llm::LLM_OPTIONS
                    .iter()
                    .flat_map(|(n, alias)| std::iter::once(*n).chain(alias.iter().copied()))
                    .map(str::to_string)
                    .collect();
                let room = most.saturating_sub(out.len());
                out.extend(
                    o.keys()
                        .filter(|k| !ajs_io::llm::is_llm_option(k))
                        .take(room)
                        .map(|k| {
                            format!(
                            "{atom}: options member '{}' is not known and is ignored (known: {})",
                            quoted(k),
                            members.join(", ")
                        )
                        }),
                );
            }
        }
        out
    }

    /// [`Capabilities::atom_names`], shared when there are no host atoms (the two built-ins).
    pub(crate) fn atom_names_cow(&self) -> std::borrow::Cow<'static, [String]> {
        static BUILTINS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        if self.atoms.is_empty() {
            std::borrow::Cow::Borrowed(BUILTINS.get_or_init(|| self.atom_names()).as_slice())
        } else {
            std::borrow::Cow::Owned(self.atom_names())
        }
    }

    /// Every atom the code may call: the two built-ins, then the host atoms sorted by name.
    pub fn atom_names(&self) -> Vec<String> {
        let mut v = vec!["httpFetch".to_string(), "llmPredict".to_string()];
        let mut custom: Vec<&String> = self
            .atoms
            .keys()
            .filter(|k| k.as_str() != "httpFetch" && k.as_str() != "llmPredict")
            .collect();
        custom.sort();
        v.extend(custom.into_iter().cloned());
        v
    }
}

/// Most run-time warnings one run keeps (`Outcome::warnings`); later ones are dropped.
pub const MAX_RUN_WARNINGS: usize = 100;

/// Most characters of a guest's key quoted in a warning.
const MAX_WARNING_KEY_CHARS: usize = 64;

/// A guest's key as quoted in a warning: at most [`MAX_WARNING_KEY_CHARS`] characters.
fn quoted(key: &str) -> std::borrow::Cow<'_, str> {
    match key.char_indices().nth(MAX_WARNING_KEY_CHARS) {
        Some((i, _)) => format!("{}…", &key[..i]).into(),
        None => key.into(),
    }
}

/// The message for an input `atom` does not declare (the compiler's warning says the same).
fn unknown_input(atom: &str, key: &str, known: &[String]) -> String {
    let key = quoted(key);
    format!(
        "{atom}: input '{key}' is not known and is ignored (inputs: {})",
        known.join(", ")
    )
}

/// The type an atom input must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputType {
    /// A string.
    String,
    /// A number.
    Number,
    /// A boolean.
    Boolean,
    /// A plain object.
    Object,
    /// An array.
    Array,
    /// Anything.
    Any,
}

impl InputType {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Number => "number",
            InputType::Boolean => "boolean",
            InputType::Object => "object",
            InputType::Array => "array",
            InputType::Any => "any value",
        }
    }

    fn accepts(self, v: &JsValue) -> bool {
        matches!(
            (self, v),
            (InputType::Any, _)
                | (InputType::String, JsValue::String(_))
                | (InputType::Number, JsValue::Number(_))
                | (InputType::Boolean, JsValue::Bool(_))
                | (InputType::Object, JsValue::Object(_))
                | (InputType::Array, JsValue::Array(_))
        )
    }
}

fn kind_of(v: &JsValue) -> &'static str {
    match v {
        JsValue::Undefined => "undefined",
        JsValue::Null => "null",
        JsValue::Bool(_) => "boolean",
        JsValue::Number(_) => "number",
        JsValue::String(_) => "string",
        JsValue::Array(_) => "array",
        JsValue::Object(_) => "object",
    }
}

/// One named input of an atom.
#[derive(Clone, Debug, PartialEq)]
pub struct InputField {
    /// The input's name.
    pub name: String,
    /// Its type.
    pub ty: InputType,
    /// Whether the call must give it (an optional input may be absent, `undefined` or `null`).
    pub required: bool,
}

/// An atom as declared to the compiler and the driver: name, input shape, fuel cost, its own
/// timeout, and whether it reaches the outside world (`io`).
#[derive(Clone, Debug, PartialEq)]
pub struct AtomDecl {
    /// The name the code calls.
    pub name: String,
    /// The declared inputs. Empty: any input is accepted (the handler checks it).
    pub inputs: Vec<InputField>,
    /// Fuel charged per call.
    pub fuel: f64,
    /// The atom's own timeout (a timed-out call is a catchable error; the run's `timeoutMs`
    /// still bounds the whole run).
    pub timeout: Duration,
    /// Whether the atom reaches outside the VM (every capability-backed atom does).
    pub io: bool,
}

/// Default fuel of a host atom.
pub const DEFAULT_ATOM_FUEL: f64 = 1.0;
/// Default timeout of a host atom: 30 s.
pub const DEFAULT_ATOM_TIMEOUT: Duration = Duration::from_secs(30);

impl AtomDecl {
    /// A host atom with the defaults: 1 fuel, 30 s, IO, no declared inputs.
    pub fn new(name: impl Into<String>) -> AtomDecl {
        AtomDecl {
            name: name.into(),
            inputs: Vec::new(),
            fuel: DEFAULT_ATOM_FUEL,
            timeout: DEFAULT_ATOM_TIMEOUT,
            io: true,
        }
    }

    /// `httpFetch`: `url` (string, required), `method`, `headers`, `body`, `responseType`;
    /// 5 fuel, 30 s.
    pub fn http_fetch() -> AtomDecl {
        AtomDecl::new("httpFetch")
            .required("url", InputType::String)
            .optional("method", InputType::String)
            .optional("headers", InputType::Object)
            .optional("body", InputType::Any)
            .optional("responseType", InputType::String)
            .fuel(crate::HTTP_FETCH_FUEL)
            .timeout(Duration::from_millis(crate::HTTP_FETCH_TIMEOUT_MS))
    }

    /// `llmPredict`: `prompt` (string, required), `options` (object); 100 fuel, 2 minutes.
    pub fn llm_predict() -> AtomDecl {
        AtomDecl::new("llmPredict")
            .required("prompt", InputType::String)
            .optional("options", InputType::Object)
            .fuel(crate::LLM_PREDICT_FUEL)
            .timeout(Duration::from_millis(crate::LLM_PREDICT_TIMEOUT_MS))
    }

    /// Declares a required input.
    pub fn required(mut self, name: impl Into<String>, ty: InputType) -> AtomDecl {
        self.inputs.push(InputField {
            name: name.into(),
            ty,
            required: true,
        });
        self
    }

    /// Declares an optional input.
    pub fn optional(mut self, name: impl Into<String>, ty: InputType) -> AtomDecl {
        self.inputs.push(InputField {
            name: name.into(),
            ty,
            required: false,
        });
        self
    }

    /// Sets the fuel cost.
    pub fn fuel(mut self, fuel: f64) -> AtomDecl {
        self.fuel = fuel;
        self
    }

    /// Sets the atom's own timeout.
    pub fn timeout(mut self, timeout: Duration) -> AtomDecl {
        self.timeout = timeout;
        self
    }

    /// Sets the IO flag.
    pub fn io(mut self, io: bool) -> AtomDecl {
        self.io = io;
        self
    }

    /// Checks a call's input against the declared shape (decision 29). Inputs the atom does not
    /// declare are ignored.
    ///
    /// # Errors
    /// A catchable message naming the atom and the input: `httpFetch: missing required input
    /// 'url'`, `httpFetch: input 'method' must be a string, got number`.
    pub fn check_input(&self, input: &JsValue) -> Result<(), String> {
        if self.inputs.is_empty() {
            return Ok(());
        }
        let JsValue::Object(m) = input else {
            return Err(format!(
                "{}: takes one object of named inputs, got {}",
                self.name,
                kind_of(input)
            ));
        };
        for f in &self.inputs {
            match m.get(&f.name) {
                None | Some(JsValue::Undefined) if f.required => {
                    return Err(format!(
                        "{}: missing required input '{}'",
                        self.name, f.name
                    ))
                }
                None | Some(JsValue::Undefined) | Some(JsValue::Null) if !f.required => {}
                Some(v) if !f.ty.accepts(v) => {
                    return Err(format!(
                        "{}: input '{}' must be {} {}, got {}",
                        self.name,
                        f.name,
                        if f.ty == InputType::Object || f.ty == InputType::Array {
                            "an"
                        } else {
                            "a"
                        },
                        f.ty.name(),
                        kind_of(v)
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Per-atom call counters shared by several runs (the reference's `quotaUsed`): give the same
/// `Arc<QuotaLedger>` to the runs that share a budget. The limits are the runner's `quotas`; the
/// ledger counts the calls of every run that holds it, atomically, so two concurrent runs can
/// never both take the last slot.
#[derive(Debug, Default)]
pub struct QuotaLedger {
    counters: Mutex<HashMap<String, Arc<AtomicU32>>>,
}

impl QuotaLedger {
    /// An empty ledger.
    pub fn new() -> QuotaLedger {
        QuotaLedger::default()
    }

    fn counter(&self, atom: &str) -> Arc<AtomicU32> {
        let mut m = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(atom.to_string()).or_default().clone()
    }

    /// Calls of `atom` counted so far.
    pub fn used(&self, atom: &str) -> u32 {
        self.counter(atom).load(Ordering::SeqCst)
    }

    /// Takes one call of `atom` if fewer than `limit` were taken; `false` when exhausted.
    pub fn try_take(&self, atom: &str, limit: u32) -> bool {
        self.counter(atom)
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    /// Forgets every count.
    pub fn reset(&self) {
        self.counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
