//! The driver: runs the stackless VM slice by slice, performs host calls, enforces the
//! wall-clock limit over the whole run (waiting included) and the boundary on what comes back.

use std::time::{Duration, Instant};

use ajs_bytecode::VerifiedProgram;
use ajs_io::{admit, FetchRequest, DEPTH_HEADER};
use ajs_vm::{ErrorKind, HostCall, JsValue, RunError, Step, Vm, VmOptions};

use crate::capabilities::{FetchCall, HostFuture};
use crate::{Options, Outcome, HTTP_FETCH_TIMEOUT_MS, LLM_PREDICT_TIMEOUT_MS};

/// Milli-fuel per slice: between slices the driver checks the deadline and lets other tasks run.
pub const SLICE_MILLI: u64 = 200_000;

fn timeout_error(ms: u64) -> RunError {
    RunError::new(
        ErrorKind::Timeout,
        format!("Execution timeout after {ms}ms. Pass a higher timeoutMs if the work genuinely needs more time."),
    )
}

fn finish(vm: &Vm, r: Result<JsValue, RunError>) -> Outcome {
    let log = vm.log().to_vec();
    match r {
        Ok(v) => Outcome {
            result: v,
            fuel_used: vm.fuel_used(),
            error: None,
            log,
        },
        Err(e) => {
            let mut o = Outcome::failed(e.message, e.kind, e.pos, vm.fuel_used());
            o.log = log;
            o
        }
    }
}

/// Runs a verified program to its end.
pub(crate) async fn run_program(
    program: VerifiedProgram,
    args: &[JsValue],
    vm_opts: VmOptions,
    options: &Options,
    depth: u32,
) -> Outcome {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(options.timeout_ms);
    let mut vm = match Vm::new(program, args, vm_opts) {
        Ok(vm) => vm,
        Err(e) => return Outcome::failed(e.message, e.kind, e.pos, 0.0),
    };
    loop {
        match vm.run(SLICE_MILLI) {
            Step::Done(v) => return finish(&vm, Ok(v)),
            Step::Failed(e) => return finish(&vm, Err(e)),
            Step::Yield => {
                if Instant::now() >= deadline {
                    return finish(&vm, Err(timeout_error(options.timeout_ms)));
                }
                tokio::task::yield_now().await;
            }
            Step::Host(call) => {
                let atom = call.atom.clone();
                let answer = match dispatch(call, options, depth) {
                    Err(refusal) => Err(refusal),
                    Ok((fut, own_timeout)) => {
                        let own_deadline = Instant::now() + own_timeout;
                        let until = deadline.min(own_deadline);
                        match tokio::time::timeout_at(until.into(), fut).await {
                            Ok(r) => r,
                            Err(_) if until == deadline || Instant::now() >= deadline => {
                                return finish(&vm, Err(timeout_error(options.timeout_ms)));
                            }
                            Err(_) => Err(format!(
                                "Atom '{atom}' timed out after {}ms",
                                own_timeout.as_millis()
                            )),
                        }
                    }
                };
                let answer = match answer {
                    Ok(v) => match check_boundary(&atom, &v, options.membrane_max_bytes) {
                        Ok(()) => Ok(v),
                        Err(e) => return finish(&vm, Err(e)),
                    },
                    Err(m) => Err(m),
                };
                if let Err(e) = vm.resume(answer) {
                    return finish(&vm, Err(e));
                }
            }
        }
    }
}

fn check_boundary(atom: &str, v: &JsValue, max: usize) -> Result<(), RunError> {
    let size = v.json_len();
    if size > max {
        return Err(RunError::new(
            ErrorKind::Boundary,
            format!(
                "Capability boundary rejected the return of '{atom}': the return is {size} bytes, over the {max}-byte limit (membraneMaxBytes)"
            ),
        ));
    }
    Ok(())
}

fn field<'a>(input: &'a JsValue, name: &str) -> Option<&'a JsValue> {
    match input {
        JsValue::Object(m) => m.get(name),
        _ => None,
    }
}

/// Turns a host call into the capability's future, or an immediate (catchable) refusal.
fn dispatch(
    call: HostCall,
    options: &Options,
    depth: u32,
) -> Result<(HostFuture, Duration), String> {
    let caps = &options.capabilities;
    match call.atom.as_str() {
        "httpFetch" => {
            let url = match field(&call.input, "url") {
                Some(JsValue::String(s)) => s.clone(),
                _ => return Err("httpFetch: input 'url' must be a string".into()),
            };
            let method = match field(&call.input, "method") {
                None | Some(JsValue::Undefined) | Some(JsValue::Null) => "GET".to_string(),
                Some(JsValue::String(s)) => s.to_ascii_uppercase(),
                Some(_) => return Err("httpFetch: input 'method' must be a string".into()),
            };
            let headers = match field(&call.input, "headers") {
                None | Some(JsValue::Undefined) | Some(JsValue::Null) => Vec::new(),
                Some(JsValue::Object(m)) => {
                    m.iter().map(|(k, v)| (k.clone(), v.display())).collect()
                }
                Some(_) => return Err("httpFetch: input 'headers' must be an object".into()),
            };
            let body = field(&call.input, "body")
                .cloned()
                .unwrap_or(JsValue::Undefined);
            let req = FetchRequest {
                url,
                method,
                headers,
            };
            let policy = options.fetch_policy.clone().unwrap_or_default();
            admit(&req, &policy, caps.fetch.is_some(), depth)?;
            let Some(fetch) = &caps.fetch else {
                return Err("Fetch blocked: the built-in fetch client is not available in this build; provide a fetch capability".into());
            };
            let mut headers = req.headers;
            headers.push((DEPTH_HEADER.to_string(), (depth + 1).to_string()));
            let fut = fetch(FetchCall {
                url: req.url,
                method: req.method,
                headers,
                body,
            });
            Ok((fut, Duration::from_millis(HTTP_FETCH_TIMEOUT_MS)))
        }
        "llmPredict" => {
            let Some(llm) = &caps.llm else {
                return Err("Capability 'llm.predict' missing".into());
            };
            let prompt = match field(&call.input, "prompt") {
                Some(JsValue::String(s)) => s.clone(),
                _ => return Err("llmPredict: input 'prompt' must be a string".into()),
            };
            let opts = field(&call.input, "options")
                .cloned()
                .unwrap_or(JsValue::Undefined);
            Ok((
                llm(prompt, opts),
                Duration::from_millis(LLM_PREDICT_TIMEOUT_MS),
            ))
        }
        name => match caps.atoms.get(name) {
            Some(f) => Ok((f(call.input), Duration::from_millis(HTTP_FETCH_TIMEOUT_MS))),
            None => Err(format!("Capability '{name}' missing")),
        },
    }
}
