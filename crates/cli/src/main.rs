//! `ajs`: run AJS snippets, conformance cases and disassemble programs.

mod cases;
mod gated;
mod matchers;
mod scripted;

use std::io::{Read, Write};
use std::process::ExitCode;

use ajs::{Eval, Options};
use serde_json::{Map, Value};

/// jemalloc, configured at build time (.cargo/config.toml) to return freed pages to the OS
/// at once: a run peaks at what it holds, and `ajs serve`'s RSS falls back after a burst.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const USAGE_TEMPLATE: &str = "\
ajs: run untrusted AJS code in a fuel-metered VM

Usage:
  ajs eval CODE [--context JSON] [--fuel N] [--timeout-ms N] [--max-source-bytes N]
      Runs a snippet (CODE '-' reads it from stdin) and prints its outcome as one JSON line:
      {\"result\": …, \"fuelUsed\": …, \"error\": {\"message\": …}}. Exits 0 even when the run
      fails (the error is in the JSON); exits 2 on bad usage.
  ajs cases FILE…
      Runs conformance case files (shared/conformance/README.md): one line per failing case,
      then `N passed, M failed`; exits 1 if any case failed.
  ajs disasm FILE [--context JSON | --params a,b]
      Prints the disassembly of a compiled artifact (a file starting with `AJSB`) or of AJS
      source, compiled as an Eval snippet whose context declares the given names (or, with
      --params, as a function body with these parameters). FILE '-' reads stdin.
  ajs compile AGENT.ajs [-o OUT.ajsb] [--strip] [--spans PATH] [--atoms a,b]
      Compiles an agent program into a versioned artifact (format version, cost-table version,
      instruction-set fingerprint; default OUT: AGENT with the extension .ajsb). --strip moves
      the span table to a sidecar file (OUT.spans, or PATH) that `exec --spans` takes back.
      --atoms declares host atoms besides httpFetch and llmPredict; a runner refuses an
      artifact calling an atom it does not provide.
{exec}{serve}{gated}  ajs --help
      Shows this text.

Options take `--name value` or `--name=value`; `--` ends the options.
";

fn usage() -> String {
    USAGE_TEMPLATE
        .replace(
            "{exec}",
            &ajs_runner::cli::EXEC_USAGE.replace("  exec", "  ajs exec"),
        )
        .replace("{gated}", gated::USAGE)
        .replace(
            "{serve}",
            &ajs_runner::cli::SERVE_USAGE.replace("  serve", "  ajs serve"),
        )
}

/// Bad command-line usage: the message, printed to stderr with exit code 2.
struct Usage(String);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("--help" | "-h" | "help") => {
            print!("{}", usage());
            Ok(ExitCode::SUCCESS)
        }
        Some("eval") => cmd_eval(&args[1..]),
        Some("cases") => cmd_cases(&args[1..]),
        Some("disasm") => cmd_disasm(&args[1..]),
        Some("compile") => cmd_compile(&args[1..]),
        Some("run") => gated::cmd_run(&args[1..]),
        Some("resume") => gated::cmd_resume(&args[1..]),
        Some("replay") => gated::cmd_replay(&args[1..]),
        Some("exec") => ajs_runner::cli::exec("ajs", &args[1..]).map_err(|e| Usage(e.0)),
        Some("serve") => ajs_runner::cli::serve("ajs", &args[1..]).map_err(|e| Usage(e.0)),
        Some(other) => Err(Usage(format!("unknown command '{other}'"))),
    };
    ajs_runner::cli::report_peak_rss();
    match result {
        Ok(code) => code,
        Err(Usage(msg)) => {
            eprintln!("ajs: {msg}\nRun 'ajs --help' for usage.");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Usage> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("cannot start the async runtime: {e}")))
}

/// Splits `--name value` / `--name=value` options from positional arguments (the runner's
/// parser, shared by both binaries).
fn parse_args(args: &[String], known: &[&str]) -> Result<ajs_runner::cli::Parsed, Usage> {
    ajs_runner::cli::parse(args, known, &[]).map_err(|e| Usage(e.0))
}

fn parse_context(text: &str) -> Result<Map<String, Value>, Usage> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(Usage(format!(
            "--context must be a JSON object, not {other}"
        ))),
        Err(e) => Err(Usage(format!("--context is not valid JSON: {e}"))),
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, Usage> {
    v.trim()
        .parse()
        .map_err(|_| Usage(format!("{name} expects a non-negative number, not '{v}'")))
}

/// Reads stdin, at most `max` bytes; `limit` names the limit and how to raise it.
fn read_stdin(max: usize, limit: &str) -> Result<Vec<u8>, Usage> {
    let mut buf = Vec::new();
    std::io::stdin()
        .take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Usage(format!("cannot read stdin: {e}")))?;
    if buf.len() > max {
        return Err(Usage(format!(
            "stdin is over the {max}-byte limit ({limit})"
        )));
    }
    Ok(buf)
}

/// Reads a file, at most `max` bytes; `limit` names the limit and how to raise it.
fn read_file(path: &str, max: usize, limit: &str) -> Result<Vec<u8>, String> {
    ajs_runner::cli::read_capped(path, max, limit)
}

fn cmd_eval(args: &[String]) -> Result<ExitCode, Usage> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", usage());
        return Ok(ExitCode::SUCCESS);
    }
    let p = parse_args(
        args,
        &["--context", "--fuel", "--timeout-ms", "--max-source-bytes"],
    )?;
    let code = match p.positional.as_slice() {
        [c] => c.clone(),
        [] => {
            return Err(Usage(
                "eval needs the code to run (or '-' to read it from stdin)".into(),
            ))
        }
        more => {
            return Err(Usage(format!(
                "eval takes one CODE argument, got {}",
                more.len()
            )))
        }
    };
    let mut options = Options::default();
    let mut context = Map::new();
    for (name, value) in &p.options {
        match name.as_str() {
            "--context" => context = parse_context(value)?,
            "--fuel" => options.fuel = parse_num(name, value)?,
            "--timeout-ms" => options.timeout_ms = parse_num(name, value)?,
            _ => options.max_source_bytes = parse_num(name, value)?,
        }
    }
    options.validate().map_err(|e| Usage(e.to_string()))?;
    let code = if code == "-" {
        let max = options.max_source_bytes;
        let Ok(bytes) = read_stdin(max, "maxSourceBytes") else {
            // the same outcome as a long CODE argument, without reading the rest
            let message = format!(
                "Source on stdin is over the {max}-byte limit (maxSourceBytes); raise it with --max-source-bytes"
            );
            println!(
                "{}",
                serde_json::json!({ "fuelUsed": 0, "error": { "message": message } })
            );
            return Ok(ExitCode::SUCCESS);
        };
        String::from_utf8(bytes)
            .map_err(|_| Usage("the code on stdin is not valid UTF-8".into()))?
    } else {
        code
    };
    let eval = Eval {
        code,
        context,
        options,
    };
    let outcome = runtime()?.block_on(eval.run());
    println!("{}", outcome.to_json());
    Ok(ExitCode::SUCCESS)
}

fn cmd_cases(args: &[String]) -> Result<ExitCode, Usage> {
    if args.is_empty() {
        return Err(Usage("cases needs at least one case file".into()));
    }
    if let Some(opt) = args.iter().find(|a| a.starts_with("--")) {
        return Err(Usage(format!("unknown option '{opt}'")));
    }
    let rt = runtime()?;
    let local = tokio::task::LocalSet::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let failed = local
        .block_on(&rt, cases::run_files(args, &mut out))
        .map_err(|e| Usage(format!("cannot write the report: {e}")))?;
    let _ = out.flush();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn cmd_compile(args: &[String]) -> Result<ExitCode, Usage> {
    let strip = args.iter().any(|a| a == "--strip");
    let rest: Vec<String> = args
        .iter()
        .filter(|a| *a != "--strip")
        .map(|a| if a == "-o" { "--out".into() } else { a.clone() })
        .collect();
    let p = parse_args(
        &rest,
        &["--out", "--spans", "--atoms", "--max-source-bytes"],
    )?;
    let file = match p.positional.as_slice() {
        [f] => f.clone(),
        [] => return Err(Usage("compile needs an AGENT source file".into())),
        more => {
            return Err(Usage(format!(
                "compile takes one AGENT argument, got {}",
                more.len()
            )))
        }
    };
    let mut out = None;
    let mut spans = None;
    let mut options = Options {
        max_source_bytes: 1024 * 1024,
        ..Options::default()
    };
    for (name, value) in &p.options {
        match name.as_str() {
            "--out" => out = Some(value.clone()),
            "--spans" => spans = Some(value.clone()),
            "--max-source-bytes" => options.max_source_bytes = parse_num(name, value)?,
            _ => {
                for atom in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    // Only the name matters to the compiler; the runner provides the real atom.
                    options.capabilities = options.capabilities.with_atom(atom, |_| async {
                        Err("not available at compile time".to_string())
                    });
                }
            }
        }
    }
    if spans.is_some() && !strip {
        return Err(Usage("--spans names the sidecar of --strip".into()));
    }
    let out = out.unwrap_or_else(|| {
        let path = std::path::Path::new(&file);
        path.with_extension("ajsb").to_string_lossy().into_owned()
    });
    let spans = spans.unwrap_or_else(|| format!("{out}.spans"));
    let read = read_file(
        &file,
        options.max_source_bytes,
        "--max-source-bytes; raise it to compile a longer program",
    );
    let source = match read {
        Ok(b) => match String::from_utf8(b) {
            Ok(s) => s,
            Err(_) => {
                eprintln!("ajs compile: {file} is not UTF-8");
                return Ok(ExitCode::from(1));
            }
        },
        Err(e) => {
            eprintln!("ajs compile: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let program = match ajs::Runner::compile_agent_with_warnings(&source, &options) {
        Ok((p, warnings)) => {
            for w in warnings {
                eprintln!(
                    "{}",
                    w.to_string()
                        .replace(" at <source>:", &format!(" at {file}:"))
                );
            }
            p
        }
        Err(ajs::CreateError::Compile(e)) => {
            eprintln!(
                "ajs compile: {}",
                e.to_string()
                    .replace(" at <source>:", &format!(" at {file}:"))
            );
            return Ok(ExitCode::from(1));
        }
        Err(e) => {
            eprintln!("ajs compile: {file}: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let write = |path: &str, bytes: &[u8]| {
        std::fs::write(path, bytes).map_err(|e| eprintln!("ajs compile: cannot write {path}: {e}"))
    };
    if strip {
        let (artifact, sidecar) = program.to_stripped_bytes();
        if write(&out, &artifact).is_err() {
            return Ok(ExitCode::from(1));
        }
        if let Some(s) = sidecar {
            if write(&spans, &s).is_err() {
                return Ok(ExitCode::from(1));
            }
        }
    } else if write(&out, &program.to_bytes()).is_err() {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_disasm(args: &[String]) -> Result<ExitCode, Usage> {
    let p = parse_args(args, &["--context", "--params"])?;
    let file = match p.positional.as_slice() {
        [f] => f.clone(),
        [] => return Err(Usage("disasm needs a FILE".into())),
        more => {
            return Err(Usage(format!(
                "disasm takes one FILE argument, got {}",
                more.len()
            )))
        }
    };
    let mut externals: Vec<String> = Vec::new();
    let mut mode = ajs_compiler::Mode::Eval;
    for (name, value) in &p.options {
        if name == "--context" {
            externals = parse_context(value)?.keys().cloned().collect();
        } else {
            mode = ajs_compiler::Mode::FunctionBody;
            externals = value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
    }
    let limit = "MAX_ARTIFACT_BYTES, the largest artifact any loader accepts";
    let bytes = if file == "-" {
        read_stdin(ajs::MAX_ARTIFACT_BYTES, limit)?
    } else {
        match read_file(&file, ajs::MAX_ARTIFACT_BYTES, limit) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("ajs disasm: {e}");
                return Ok(ExitCode::from(1));
            }
        }
    };
    if bytes.starts_with(&ajs_bytecode::program::MAGIC) {
        return Ok(match ajs_bytecode::Program::from_bytes(&bytes) {
            Ok(program) => {
                print!("{}", program.disassemble());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ajs disasm: {file}: {e}");
                ExitCode::from(1)
            }
        });
    }
    let Ok(source) = String::from_utf8(bytes) else {
        eprintln!("ajs disasm: {file} is neither an ajs artifact nor UTF-8 source");
        return Ok(ExitCode::from(1));
    };
    let atoms = ["httpFetch".to_string(), "llmPredict".to_string()];
    let source_name = if file == "-" {
        "<stdin>"
    } else {
        file.as_str()
    };
    let opts = ajs_compiler::CompileOptions {
        mode,
        externals: &externals,
        atoms: &atoms,
        source_name,
    };
    match ajs_compiler::compile(&source, &opts) {
        Ok(program) => {
            print!("{}", program.disassemble());
            match program.verify() {
                Ok(_) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("ajs disasm: the compiled program does not verify: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        Err(e) => {
            eprintln!("ajs disasm: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
