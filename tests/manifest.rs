//! The manifest (docs/manifest.md) computed from compiled agents: atoms, sites, literal URLs
//! and prefixes, call counts, and a fuel bound no run exceeds.

use std::collections::HashMap;

use ajs_vm::manifest::{Caps, Manifest, UrlInfo};
use ajs_vm::{AtomSpec, JsValue, Step, Vm, VmOptions, MILLI};

use crate::common;

fn manifest(src: &str, atoms: &[&str]) -> Manifest {
    Manifest::of(&common::agent_program(src, atoms))
}

fn url(u: &str, exact: bool) -> Option<UrlInfo> {
    Some(UrlInfo {
        url: u.into(),
        exact,
    })
}

#[test]
fn a_literal_start_concatenated_is_a_prefix() {
    let m = manifest(
        "function main({ p: 1 }) { return httpFetch({ url: 'https://api.example.com/items?page=' + p }).body }",
        &["httpFetch"],
    );
    let fetch = &m.atoms["httpFetch"];
    assert_eq!(
        fetch.sites[0].url,
        url("https://api.example.com/items?page=", false)
    );
    assert_eq!(fetch.max_calls, Some(1));
    assert_eq!(fetch.sites[0].line, Some(1));
    assert!(fetch.sites[0].column.is_some());
    assert!(m.output.result["httpFetch"]);
    assert!(m.fuel.max.is_some(), "{:?}", m.fuel);
    assert_eq!(m.params.len(), 1);
    assert_eq!(m.params[0].ty, "number");
}

#[test]
fn templates_and_exact_urls_and_methods() {
    let m = manifest(
        "function main({ id: 'a' }) {
           let a = httpFetch({ url: `https://api.example.com/users/${id}/posts` })
           let b = httpFetch({ url: 'https://status.example.org/ok', method: 'POST' })
           return a.status + b.status
         }",
        &["httpFetch"],
    );
    let sites = &m.atoms["httpFetch"].sites;
    assert_eq!(sites[0].url, url("https://api.example.com/users/", false));
    assert_eq!(sites[1].url, url("https://status.example.org/ok", true));
    assert_eq!(sites[1].method.as_deref(), Some("POST"));
    assert_eq!(sites[0].method, None);
    assert_eq!(m.atoms["httpFetch"].max_calls, Some(2));
}

#[test]
fn a_url_from_data_is_not_claimed() {
    let m = manifest(
        "function main({ u: 'x' }) { return httpFetch({ url: u }).status }",
        &["httpFetch"],
    );
    assert_eq!(m.atoms["httpFetch"].sites[0].url, None);
}

#[test]
fn loops_and_callbacks_make_counts_and_fuel_unbounded() {
    let m = manifest(
        "function main({ ids: [1] }) {
           let out = []
           let i = 0
           while (i < ids.length) { out.push(httpFetch({ url: 'https://a.example.com/' + ids[i] }).status); i = i + 1 }
           return out
         }",
        &["httpFetch"],
    );
    assert_eq!(m.atoms["httpFetch"].max_calls, None);
    assert!(m.atoms["httpFetch"].sites[0].in_loop);
    assert_eq!(m.fuel.max, None);
    assert!(!m.fuel.loops.is_empty());
    let m = manifest(
        "function main({ xs: ['a'] }) { return xs.map(x => llmPredict({ prompt: x })) }",
        &["llmPredict"],
    );
    let site = &m.atoms["llmPredict"].sites[0];
    assert!(site.in_callback && site.in_loop);
    assert_eq!(m.atoms["llmPredict"].max_calls, None);
    assert_eq!(m.fuel.max, None);
    assert!(m.fuel.loops.iter().any(|l| l.callback), "{:?}", m.fuel);
}

#[test]
fn a_helper_called_in_a_loop_repeats_its_sites() {
    let m = manifest(
        "function get(u) { return httpFetch({ url: 'https://a.example.com/' + u }).body }
         function main({ n: 2 }) { let s = ''; let i = 0; while (i < n) { s = s + get(i); i = i + 1 } return s }",
        &["httpFetch"],
    );
    let fetch = &m.atoms["httpFetch"];
    assert!(fetch.sites[0].in_loop);
    assert_eq!(fetch.max_calls, None);
}

#[test]
fn straight_line_helpers_add_their_calls_and_recursion_is_named() {
    let m = manifest(
        "function get(u) { return llmPredict({ prompt: u, options: { responseFormat: { type: 'json_object' } } }) }
         function main({ a: 'x' }) { return [get(a), get(a + '!')] }",
        &["llmPredict"],
    );
    assert_eq!(m.atoms["llmPredict"].max_calls, Some(2));
    assert_eq!(m.atoms["llmPredict"].sites[0].response_format, Some(true));
    assert!(m.fuel.max.is_some(), "{:?}", m.fuel);
    assert!(m.recursion.is_empty());
    let m = manifest(
        "function fact(n) { return n < 2 ? 1 : n * fact(n - 1) }
         function main({ n: 3 }) { return fact(n) }",
        &[],
    );
    assert_eq!(m.recursion, vec!["fact".to_string()]);
    assert_eq!(m.fuel.max, None);
}

#[test]
fn fetched_text_flowing_into_a_prompt_is_reported() {
    let m = manifest(
        "function main({ q: 'x' }) {
           let page = httpFetch({ url: 'https://api.example.com/s?q=' + q })
           let answer = llmPredict({ prompt: 'Summarize: ' + page.body })
           return { answer }
         }",
        &["httpFetch", "llmPredict"],
    );
    assert!(m
        .output
        .flows
        .iter()
        .any(|f| f.from == "httpFetch" && f.to == "llmPredict"));
    assert!(m.output.result["llmPredict"]);
    assert_eq!(m.atoms["llmPredict"].sites[0].response_format, Some(false));
    let m = manifest(
        "function main({ q: 'x' }) { let page = httpFetch({ url: 'https://a.example.com/' }); return q.length }",
        &["httpFetch"],
    );
    assert!(!m.output.result["httpFetch"], "{:?}", m.output);
}

// ---- the fuel bound holds for every run ----

/// xorshift64*: the same inputs on every run of the test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn string(&mut self, max: u64) -> String {
        const UNITS: [char; 12] = ['a', 'Z', ' ', '0', '7', 'L', '"', '\\', 'ß', 'é', 'Σ', '𝄞'];
        let n = self.below(max + 1);
        (0..n)
            .map(|_| UNITS[self.below(UNITS.len() as u64) as usize])
            .collect()
    }
    fn number(&mut self) -> f64 {
        match self.below(4) {
            0 => self.below(10) as f64,
            1 => -(self.below(1000) as f64) / 7.0,
            2 => 1e21 * self.below(5) as f64,
            _ => (self.next() >> 11) as f64,
        }
    }
    fn json_text(&mut self, max: u64) -> String {
        match self.below(4) {
            0 => format!(
                "{{\"a\": {}, \"b\": {:?}}}",
                self.number(),
                self.string(max)
            ),
            1 => format!("[{}, {:?}, null, true]", self.number(), self.string(max)),
            2 => self.string(max),
            _ => format!("{:?}", self.string(max)),
        }
    }
}

/// Runs `program` on `args`, answering atom calls from `answer`; the fuel used, in milli.
fn fuel_of(
    program: &ajs_bytecode::VerifiedProgram,
    args: &[JsValue],
    mut answer: impl FnMut(&str) -> JsValue,
) -> u64 {
    let atoms: HashMap<String, AtomSpec> = program
        .atoms
        .iter()
        .map(|a| {
            let cost = match a.as_str() {
                "httpFetch" => 5 * MILLI,
                "llmPredict" => 100 * MILLI,
                _ => MILLI,
            };
            (a.clone(), AtomSpec { cost, quota: None })
        })
        .collect();
    let opts = VmOptions {
        fuel: 1 << 50,
        atoms,
        ..VmOptions::default()
    };
    let mut vm = Vm::new(program.clone(), args, opts).unwrap();
    loop {
        match vm.run(u64::MAX) {
            Step::Host(call) => {
                let name = call.atom.clone();
                vm.resume(Ok(answer(&name))).unwrap();
            }
            Step::Yield => {}
            Step::Done(_) | Step::Failed(_) | Step::Blocked => break,
        }
    }
    (vm.fuel_used() * MILLI as f64).round() as u64
}

/// Straight-line agents over strings, numbers, JSON and atoms: every run's fuel is at most the
/// manifest's bound. Prints the bound's tightness (bound / most fuel seen).
#[test]
fn the_fuel_bound_holds_for_random_inputs() {
    type Args = fn(&mut Rng) -> Vec<JsValue>;
    let agents: [(&str, &[&str], Args); 4] = [
        (
            "function main({ name: 'x', n: 1 }) {
               let g = 'Hello, ' + name.trim().toUpperCase()
               let parts = g.split(' ')
               if (n > 3) { g = g + '!' + n } else { g = `${g}?${n * 2}` }
               return { g, parts, len: g.length, idx: g.indexOf('L'), same: g === name }
             }",
            &[],
            |r| vec![JsValue::String(r.string(3000)), JsValue::Number(r.number())],
        ),
        (
            "function main({ doc: '{}' }) {
               let o = null
               try { o = JSON.parse(doc) } catch (e) { o = { bad: doc.slice(0, 20) } }
               let s = JSON.stringify({ o, t: typeof o })
               return s.length > 10 ? s.slice(0, 10) + s.slice(-3) : s
             }",
            &[],
            |r| vec![JsValue::String(r.json_text(2000))],
        ),
        (
            "function main({ q: 'x' }) {
               let r = httpFetch({ url: 'https://api.example.com/s?q=' + encodeURIComponent(q) })
               let a = llmPredict({ prompt: 'Summarize: ' + r.body })
               return { a, n: r.body.length, head: r.body.slice(0, 5) }
             }",
            &["httpFetch", "llmPredict"],
            |r| vec![JsValue::String(r.string(1500))],
        ),
        (
            "function main({ x: 1, y: 2, tag: 't' }) {
               let t = `${tag}:${x + y}`
               if (x > y) { t = t.padStart(20, '*') } else { t = t.toLowerCase() + tag.repeat(2) }
               let w = [t, t.includes(tag), Math.max(x, y), tag < t, parseFloat(tag)]
               return JSON.stringify(w).length + tag.localeCompare(t)
             }",
            &[],
            |r| {
                vec![
                    JsValue::Number(r.number()),
                    JsValue::Number(r.number()),
                    JsValue::String(r.string(2500)),
                ]
            },
        ),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (src, atoms, args) in agents {
        let program = common::agent_program(src, atoms);
        let m = Manifest::of(&program);
        let bound = m.fuel.max.unwrap_or_else(|| panic!("{src}: {:?}", m.fuel)) * MILLI;
        let fixed = m.fuel.fixed.unwrap() * MILLI;
        // the same bound at the caps these inputs keep to (arguments and answers' weights)
        let capped = Caps {
            max_arg_weight: Some(8 * 1024),
            max_answer_weight: Some(16 * 1024),
            ..Caps::default()
        };
        let tight = Manifest::with_caps(&program, &capped).fuel.max.unwrap() * MILLI;
        assert!(tight <= bound);
        let mut most = 0u64;
        for _ in 0..150 {
            let a = args(&mut rng);
            let fuel = fuel_of(&program, &a, |name| {
                let body = rng.string(4000);
                match name {
                    "httpFetch" => {
                        JsValue::from_json(&serde_json::json!({ "status": 200, "body": body }))
                    }
                    _ => JsValue::String(body),
                }
            });
            assert!(fuel <= tight, "{src}: {fuel} > {tight} on {a:?}");
            most = most.max(fuel);
        }
        assert!(fixed <= bound);
        println!(
            "bound {} fuel at the heap limit, {} at the inputs' caps (fixed {}), most seen {:.1} fuel: {:.0}x, {:.0}x",
            bound / MILLI,
            tight / MILLI,
            fixed / MILLI,
            most as f64 / MILLI as f64,
            bound as f64 / most.max(1) as f64,
            tight as f64 / most.max(1) as f64
        );
    }
}

// ---- embedded in the artifact, recomputed at load ----

const FETCHER: &str = "function main({ p: 1 }) { return httpFetch({ url: 'https://api.example.com/items?page=' + p }).status }";

fn replace_once(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("{from} not in the artifact"));
    let mut out = bytes.to_vec();
    out[at..at + from.len()].copy_from_slice(to.as_bytes());
    out
}

#[test]
fn compiled_artifacts_carry_their_manifest_and_an_edited_one_is_refused() {
    use ajs::ProgramManifest;
    let program = common::agent_program(FETCHER, &["httpFetch"]);
    let bytes = ajs::manifest::artifact_bytes(&program);
    let loaded = ajs::load_artifact(&bytes, None).unwrap();
    assert_eq!(loaded.manifest(), program.manifest());
    let (_, embedded) = ajs::Program::from_bytes_and_manifest(&bytes).unwrap();
    assert_eq!(embedded, Some(program.manifest().to_bytes()));
    // the call count, the URL, the fuel bound: each edit is refused, naming the field
    for (from, to, field) in [
        ("\"maxCalls\":1", "\"maxCalls\":0", "atoms"),
        ("items?page=", "itemz?page=", "atoms"),
        ("\"recursion\":[]", "\"recursion\":{}", "recursion"),
    ] {
        let edited = replace_once(&bytes, from, to);
        match ajs::load_artifact(&edited, None) {
            Err(ajs::LoadError::Manifest(m)) => assert!(m.contains(field), "{m}"),
            other => panic!("{from}: {other:?}"),
        }
    }
    let max = program.manifest().fuel.max.unwrap().to_string();
    let smaller = format!("{}{}", "1", "0".repeat(max.len() - 1));
    let edited = replace_once(
        &bytes,
        &format!("\"max\":{max}"),
        &format!("\"max\":{smaller}"),
    );
    let e = ajs::load_artifact(&edited, None).unwrap_err();
    assert!(e.to_string().contains("'fuel' differs"), "{e}");
    assert!(e.to_string().contains("recompile"), "{e}");
}

#[test]
fn stripped_artifacts_and_older_layouts_still_load() {
    use ajs::ProgramManifest;
    let program = common::agent_program(FETCHER, &["httpFetch"]);
    // stripped: the manifest of the program without spans, the sidecar taken back
    let (artifact, sidecar) = ajs::manifest::stripped_artifact_bytes(&program);
    let bare = ajs::load_artifact(&artifact, None).unwrap();
    assert_eq!(bare.manifest().atoms["httpFetch"].sites[0].line, None);
    let with = ajs::load_artifact(&artifact, sidecar.as_deref()).unwrap();
    assert_eq!(with.manifest(), program.manifest());
    // no manifest section (a library's `to_bytes`): the manifest is computed when asked
    let plain = program.to_bytes();
    assert_eq!(
        ajs::load_artifact(&plain, None).unwrap().manifest(),
        program.manifest()
    );
    // format version 1: no manifest section at all
    let mut v1 = plain.clone();
    assert_eq!(v1.pop(), Some(0));
    v1[4..6].copy_from_slice(&1u16.to_le_bytes());
    assert_eq!(
        ajs::load_artifact(&v1, None).unwrap().manifest(),
        program.manifest()
    );
    // a version this build does not read is refused naming both
    let mut v9 = plain;
    v9[4..6].copy_from_slice(&9u16.to_le_bytes());
    let e = ajs::load_artifact(&v9, None).unwrap_err();
    assert!(
        matches!(e, ajs::LoadError::FormatVersion { found: 9, .. }),
        "{e}"
    );
}

/// A literal URL, or a literal start that names a whole host, is judged against the allowlist as
/// every URL it can become would be; a start ending inside the host is not decidable.
#[test]
fn known_urls_are_judged_against_the_allowlist() {
    let policy = ajs::FetchPolicy {
        domains: Some(vec!["api.example.com".into(), "a.example.org:8443".into()]),
        ..ajs::FetchPolicy::default()
    };
    let judge = |u: &str, exact: bool| policy.judge_known_url(u, exact).map(|r| r.is_ok());
    assert_eq!(
        judge("https://api.example.com/items?page=", false),
        Some(true)
    );
    assert_eq!(judge("https://api.example.com?q=", false), Some(true));
    assert_eq!(judge("https://evil.example.org/x", true), Some(false));
    assert_eq!(judge("https://evil.example.org/", false), Some(false));
    // the port is known once the authority is whole
    assert_eq!(judge("https://api.example.com:8443/", false), Some(false));
    assert_eq!(judge("https://a.example.org:8443/v1/", false), Some(true));
    // a backslash ends an http authority as a slash does
    assert_eq!(
        judge("https://evil.example.org\\@api.example.com/", false),
        Some(false)
    );
    // not decidable: the host (or its port) may go on
    assert_eq!(judge("https://api.", false), None);
    assert_eq!(judge("https://api.example.com", false), None);
    assert_eq!(judge("https://api.example.com:", false), None);
    assert_eq!(judge("api.example.com/x", false), None);
    // no allowlist: nothing to judge by
    assert_eq!(
        ajs::FetchPolicy::default().judge_known_url("https://x.org/", true),
        None
    );
}

/// A spread or `Object.assign` after a literal `url` may replace it (the run fetches what the
/// argument says): the literal is not claimed, directly, through an alias or a helper; a
/// `url` written after the spread is.
#[test]
fn a_spread_or_assign_after_a_literal_url_unclaims_it() {
    let m = manifest(
        "function put(o, e) { Object.assign(o, e); return 0 }
         function main({ extra: { a: 1 } }) {
           let a = httpFetch({ url: 'https://api.example.com/a', ...extra })
           let o = { url: 'https://api.example.com/b' }
           let p = o
           Object.assign(p, extra)
           let b = httpFetch(o)
           let q = { url: 'https://api.example.com/c' }
           put(q, extra)
           let c = httpFetch(q)
           let d = httpFetch({ ...extra, url: 'https://api.example.com/d' })
           let e = llmPredict({ prompt: 'x', ...extra })
           let f = llmPredict({ ...extra, prompt: 'x' })
           return a.status + b.status + c.status + d.status + e + f
         }",
        &["httpFetch", "llmPredict"],
    );
    let sites = &m.atoms["httpFetch"].sites;
    assert_eq!(sites[0].url, None, "{:?}", sites[0]);
    assert_eq!(sites[1].url, None, "{:?}", sites[1]);
    assert_eq!(sites[2].url, None, "{:?}", sites[2]);
    assert_eq!(sites[3].url, url("https://api.example.com/d", true));
    // a spread may bring `options.responseFormat`: not known
    let llm = &m.atoms["llmPredict"].sites;
    assert_eq!(llm[0].response_format, None, "{:?}", llm[0]);
    assert_eq!(llm[1].response_format, None, "{:?}", llm[1]);
}

/// More straight-line agents, each leaning on other natives (regular expressions, JSON, keys and
/// entries, spreads, Sets, Dates, helpers, try/catch, atoms with nested answers): every run's
/// fuel is at most the bound, and the bound is a number.
#[test]
fn the_fuel_bound_holds_across_natives() {
    type Args = fn(&mut Rng) -> Vec<JsValue>;
    let s1: Args = |r| vec![JsValue::String(r.string(2000))];
    let s2: Args = |r| vec![JsValue::String(r.string(1500)), JsValue::Number(r.number())];
    let agents: Vec<(&str, &[&str], Args)> = vec![
        (
            "function main({ s: 'x' }) {
               let a = s.split(/[ a]+/)
               let b = s.replace(/[0-9]/g, '#').replaceAll('Z', 'zz')
               let m = s.match(/([a-z])([A-Z])?/g)
               let t = /\\d+/.test(s)
               return { a, b, m, t, n: s.search(/L/) }
             }",
            &[],
            s1,
        ),
        (
            "function main({ s: 'x', n: 1 }) {
               let r = s.repeat(3) + '|'.padEnd(40, s) + s.padStart(10, '-')
               let parts = r.split('|')
               let j = JSON.stringify({ parts, n, s }, null, 2)
               let back = JSON.parse(j)
               return { k: Object.keys(back), e: Object.entries(back), l: j.length }
             }",
            &[],
            s2,
        ),
        (
            "function tidy(x) { return x.trim().toLowerCase().normalize('NFKD') }
             function wrap(x, n) { return `<${x}>${Math.round(n * 100) / 100}` }
             function main({ s: 'x', n: 1 }) {
               let a = tidy(s)
               let b = wrap(a, n) + wrap(s.toUpperCase(), Math.sqrt(Math.abs(n)))
               let xs = [...a.split(''), ...b.split(' '), n]
               let set = Set(xs)
               return { size: set.size, xs: xs.slice(0, 5), b, has: set.has('a') }
             }",
            &[],
            s2,
        ),
        (
            "function main({ s: 'x', n: 1 }) {
               let o = {}
               try {
                 o = JSON.parse(s)
               } catch (e) {
                 o = { err: ('' + e).slice(0, 30), s: encodeURIComponent(s) }
               }
               let d = Date(Math.abs(n) % 1e12)
               let iso = d.toISOString()
               let k = typeof o === 'object' && o !== null ? Object.keys(o).join(',') : 'none'
               return { iso, k, f: n.toFixed(3), p: n.toPrecision(5), str: '' + n }
             }",
            &[],
            |r| {
                vec![
                    JsValue::String(r.json_text(1500)),
                    JsValue::Number(r.number()),
                ]
            },
        ),
        (
            "function ask(p) { return llmPredict({ prompt: 'Q: ' + p }) }
             function main({ q: 'x' }) {
               let r = httpFetch({ url: `https://api.example.com/s/${encodeURIComponent(q)}` })
               let body = r.body
               let parsed = null
               try { parsed = JSON.parse(body) } catch (e) { parsed = { raw: body.slice(0, 100) } }
               let summary = ask(JSON.stringify(parsed))
               let again = r.status === 200 ? ask(summary + body.length) : 'skip'
               return { summary, again, keys: Object.keys(parsed || {}), up: body.toUpperCase() }
             }",
            &["httpFetch", "llmPredict"],
            s1,
        ),
        (
            "function main({ a: 'x', b: 'y' }) {
               let c = a < b ? a.concat(b) : b.concat(a, a)
               let i = c.indexOf(b), l = c.lastIndexOf(a)
               let u = c.at(-1) + c.charAt(2) + c.substring(1, 9) + c.slice(-4)
               let arr = c.split('').reverse().sort()
               return { u, i, l, w: arr.join(''), inc: c.includes(a), sw: c.startsWith(b) }
             }",
            &[],
            |r| {
                vec![
                    JsValue::String(r.string(1200)),
                    JsValue::String(r.string(1200)),
                ]
            },
        ),
        (
            "function main({ xs: [1] }) {
               let s = '' + xs
               let t = `${xs}`
               let parts = s.split('')
               let again = parts.join('-').split('-')
               return { n: s.length + t.length, m: again.length, u: JSON.stringify(again).length }
             }",
            &[],
            |r| {
                let n = 2000 + r.below(1000) as usize;
                let xs: Vec<serde_json::Value> = (0..n)
                    .map(|i| match i % 3 {
                        0 => serde_json::json!(-1.2345678901234567e-300),
                        1 => serde_json::json!(1e20),
                        _ => serde_json::json!(-0.000_001_234_567_890_123_456_7),
                    })
                    .collect();
                vec![JsValue::from_json(&serde_json::Value::Array(xs))]
            },
        ),
    ];
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let capped = Caps {
        max_arg_weight: Some(8 * 1024),
        max_answer_weight: Some(16 * 1024),
        ..Caps::default()
    };
    let mut failures = Vec::new();
    for (src, atoms, args) in agents {
        let program = common::agent_program(src, atoms);
        let m = Manifest::of(&program);
        let Some(bound) = m.fuel.max else {
            failures.push(format!("{src}: no bound {:?}", m.fuel));
            continue;
        };
        let tight = Manifest::with_caps(&program, &capped).fuel.max.unwrap() * MILLI;
        assert!(tight <= bound * MILLI);
        for _ in 0..100 {
            let a = args(&mut rng);
            let fuel = fuel_of(&program, &a, |name| {
                let body = rng.json_text(3000);
                match name {
                    "httpFetch" => JsValue::from_json(
                        &serde_json::json!({ "status": 200, "ok": true, "body": body }),
                    ),
                    _ => JsValue::String(body),
                }
            });
            if fuel > tight {
                failures.push(format!("{src}: {fuel} > {tight} on {a:?}"));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A replace callback is a loop over the matches: its atoms are unbounded and so is the fuel.
#[test]
fn a_replace_callback_is_a_loop() {
    let m = manifest(
        "function main({ s: 'x' }) { return { t: s.replace(/a/g, m => llmPredict({ prompt: m })) } }",
        &["llmPredict"],
    );
    assert_eq!(m.atoms["llmPredict"].max_calls, None);
    assert!(m.atoms["llmPredict"].sites[0].in_callback);
    assert_eq!(m.fuel.max, None);
}

/// A loop elsewhere in the function does not turn exclusive branches into a sum: the count is
/// still the worst path's; calls in sequence still add up.
#[test]
fn exclusive_branches_beside_a_loop_count_the_worst_path() {
    let m = manifest(
        "function main({ xs: [1], c: true }) {
           let n = 0
           while (n < xs.length) { n = n + 1 }
           let z = c ? atomC(1) : atomC(2) + atomC(3)
           let y = atomD(1)
           if (c) { y = atomD(2) } else { y = atomD(3) }
           let w = xs.map(x => x + 1)
           if (n > 2) { y = atomD(4) + atomD(5) }
           return { z, n, y, w }
         }",
        &["atomC", "atomD"],
    );
    assert_eq!(m.atoms["atomC"].max_calls, Some(2));
    assert_eq!(m.atoms["atomD"].max_calls, Some(4));
    assert_eq!(m.fuel.max, None);
}

/// Every single-byte edit of an artifact's embedded manifest, and of its header (the format,
/// cost-table and instruction-set fingerprint), is refused at load with a typed error.
#[test]
fn every_byte_edit_of_the_manifest_section_is_refused() {
    let program = common::agent_program(FETCHER, &["httpFetch"]);
    let bytes = ajs::manifest::artifact_bytes(&program);
    let start = bytes
        .windows(10)
        .position(|w| w == b"{\"version\"")
        .expect("the manifest's JSON in the artifact");
    // the section's length prefix and its Some tag come just before the JSON
    let section = start.saturating_sub(4)..bytes.len();
    let mut refused = 0;
    for at in section.chain(0..16) {
        for flip in [0x01u8, 0x20, 0x80] {
            let mut edited = bytes.clone();
            edited[at] ^= flip;
            match ajs::load_artifact(&edited, None) {
                Err(
                    ajs::LoadError::Manifest(_)
                    | ajs::LoadError::Malformed { .. }
                    | ajs::LoadError::BadMagic
                    | ajs::LoadError::FormatVersion { .. }
                    | ajs::LoadError::CostVersion { .. }
                    | ajs::LoadError::IsaMismatch { .. },
                ) => refused += 1,
                Err(e) if at < start => {
                    // an edit of the bytes before the section may hit the program's tail
                    let _ = e;
                    refused += 1;
                }
                other => panic!("byte {at} ^ {flip:#x}: {other:?}"),
            }
        }
    }
    assert!(refused > 3 * 16, "{refused}");
}

/// Fetched data reaches a prompt through a concatenation, an object's field, a helper's
/// return value and `JSON.stringify`; a condition on it alone is control, not data: no flow
/// (docs/manifest.md says so).
#[test]
fn each_way_fetched_data_reaches_a_prompt_is_a_flow() {
    let flows = |body: &str| {
        let src = format!(
            "function wrap(x) {{ return 'got ' + x }}
             function main({{ q: 'x' }}) {{
               let r = httpFetch({{ url: 'https://api.example.com/' }})
               {body}
               return {{ n: 1 }}
             }}"
        );
        let m = manifest(&src, &["httpFetch", "llmPredict"]);
        m.output
            .flows
            .iter()
            .any(|f| f.from == "httpFetch" && f.to == "llmPredict")
    };
    assert!(flows(
        "let a = llmPredict({ prompt: 'Summarize ' + r.body })"
    ));
    assert!(flows(
        "let o = { d: r.body }\nlet a = llmPredict({ prompt: o.d })"
    ));
    assert!(flows("let a = llmPredict({ prompt: wrap(r.body) })"));
    assert!(flows("let a = llmPredict({ prompt: JSON.stringify(r) })"));
    assert!(flows(
        "let a = llmPredict({ prompt: `${r.body.slice(0, 9)}` })"
    ));
    assert!(!flows(
        "let p = 'a'\nif (r.ok) { p = 'b' }\nlet a = llmPredict({ prompt: p })"
    ));
}

/// The server's check judges a known URL as the run-time check judges every URL it can
/// become: userinfo, case, trailing dots, ports, IPv6 literals, and whatever follows a prefix.
#[test]
fn the_manifest_check_agrees_with_the_run_time_check() {
    let policy = ajs_io::FetchPolicy {
        domains: Some(vec!["api.example.com".into(), "[::1]:8443".into()]),
        ..ajs_io::FetchPolicy::default()
    };
    let run = |u: &str| {
        let req = ajs_io::FetchRequest {
            url: u.into(),
            method: "GET".into(),
            headers: Vec::new(),
        };
        ajs_io::admit(&req, &policy, true, 0)
    };
    let domain_refused = |r: &Result<(), String>| r.as_ref().is_err_and(|e| e.contains("domain"));
    let exact = [
        "https://api.example.com/x",
        "https://api.example.com@evil.com/",
        "https://evil.com@api.example.com/",
        "https://API.Example.COM/x",
        "https://api.example.com./x",
        "https://api.example.com:8443/",
        "https://[::1]:8443/x",
        "https://[::1]/x",
        "https://[0:0:0:0:0:0:0:1]:8443/",
        "http://api.example.com%2eevil.com/",
        "https://api.example.com\\@evil.com/",
    ];
    for u in exact {
        let judged = policy.judge_known_url(u, true);
        if let Some(j) = judged {
            assert_eq!(j.is_ok(), run(u).is_ok(), "{u}: {j:?} vs {:?}", run(u));
        }
    }
    let prefixes = [
        "https://api.example.com",
        "https://api.example.com/",
        "https://api.example.com?",
        "https://api.example.com:",
        "https://api.",
        "https://evil.com/",
        "https://evil.com#",
        "https://[::1]:8443/",
        "https://api.example.com@evil.com/",
    ];
    let suffixes = [
        "",
        "x",
        ".evil.com/",
        "@evil.com/",
        ":8443/",
        "/a@evil.com",
        "\\@evil.com/",
        "?@evil.com",
    ];
    for p in prefixes {
        let Some(j) = policy.judge_known_url(p, false) else {
            continue;
        };
        for s in suffixes {
            let u = format!("{p}{s}");
            let r = run(&u);
            if j.is_err() {
                assert!(r.is_err(), "{u}: the manifest refuses what the run allows");
            } else {
                assert!(
                    !domain_refused(&r),
                    "{u}: the manifest allows what the run refuses: {r:?}"
                );
            }
        }
    }
    // a start that ends inside the authority is not judged
    assert_eq!(
        policy.judge_known_url("https://api.example.com", false),
        None
    );
    assert_eq!(
        policy.judge_known_url("https://api.example.com:", false),
        None
    );
}

/// A helper's parameter known at every call (a literal base passed in) gives its sites' URLs;
/// different literals at two calls give their common start; an entry's are never known.
#[test]
fn a_literal_passed_to_a_helper_reaches_its_url() {
    let m = manifest(
        "function getJson(url) { return httpFetch({ url, method: 'GET' }) }
         function under(base, path) { return httpFetch({ url: base + path }) }
         function main({ id: 'x' }) {
           let a = getJson('https://api.example.com/a')
           let b = getJson('https://api.example.com/b/' + id)
           let c = under('https://api.example.com/v1', '/x')
           let d = under('https://evil.example.org', '/y')
           return { a, b, c, d }
         }",
        &["httpFetch"],
    );
    let sites = &m.atoms["httpFetch"].sites;
    assert_eq!(sites[0].url, url("https://api.example.com/", false));
    assert_eq!(sites[0].method.as_deref(), Some("GET"));
    assert_eq!(sites[1].url, url("https://", false));
    let m = manifest(
        "function getJson(url) { return httpFetch({ url }) }
         function main({ u: 'x' }) { return { a: getJson('https://api.example.com/a'), b: getJson(u) } }",
        &["httpFetch"],
    );
    assert_eq!(m.atoms["httpFetch"].sites[0].url, None);
}

/// A computed key may be `url`: it replaces the literal one (or, when it is a known text, sets
/// that property).
#[test]
fn a_computed_key_may_replace_a_literal_url() {
    let m = manifest(
        "function main({ k: 'x', s: 'y' }) {
           let a = httpFetch({ url: 'https://api.example.com/a', [k]: s })
           let b = httpFetch({ url: 'https://api.example.com/b', ['me' + 'thod']: 'POST' })
           return { a, b }
         }",
        &["httpFetch"],
    );
    let sites = &m.atoms["httpFetch"].sites;
    assert_eq!(sites[0].url, None, "{:?}", sites[0]);
    assert_eq!(sites[1].url, url("https://api.example.com/b", true));
}
