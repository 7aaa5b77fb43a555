//! Regex calls are priced like the rest of the VM and stop at the run's deadline and
//! cancellation (issue 27): hostile shapes on 1M–4M-unit haystacks either run out of fuel
//! quickly or spend fuel at a time per fuel within a wide factor of a plain loop's, measured in
//! the same test; a search that would run for minutes ends at `timeoutMs` plus a grace.

use std::time::{Duration, Instant};

use super::adv::{eval, fuel, rt};
use ajs::{CancellationToken, ErrorKind, Eval, Options};
use serde_json::json;

/// Time per fuel of a run, in nanoseconds, and its outcome.
fn ns_per_fuel(code: &str, budget: f64) -> (f64, ajs::Outcome) {
    let t = Instant::now();
    let out = eval(code, json!({}), fuel(budget));
    let ns = t.elapsed().as_nanos() as f64;
    (ns / out.fuel_used.max(1.0), out)
}

/// A plain `while` loop's time per fuel (the median of three runs).
fn loop_ns_per_fuel() -> f64 {
    let mut xs: Vec<f64> = (0..3)
        .map(|_| ns_per_fuel("let i = 0\nwhile (i < 1000000) { i++ }\nreturn i", 1e6).0)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs[1]
}

/// The hostile shapes: nested quantifiers, large counted repetitions, Unicode classes,
/// alternations of many literals, global searches with groups, on 1M–4M-unit haystacks.
fn shapes() -> Vec<String> {
    // as many literals as the 1,000-character pattern limit allows
    let words: Vec<String> = (0..180).map(|i| format!("{:x}", i * 7919 % 4096)).collect();
    let alternation = words.join("|");
    vec![
        r"return /(\w{0,60}\s?){1,30}[^\w\s]/u.test('ab'.repeat(500000))".into(),
        r"return /(a+)+b/.test('a'.repeat(2000000))".into(),
        r"return /(?:a|b){200,400}c/.test('ab'.repeat(1000000))".into(),
        r"return /\p{L}{20}1/u.test('éa'.repeat(1000000))".into(),
        format!("return /({alternation})z/.test('1ef7'.repeat(500000))"),
        r"return 'ab'.repeat(1000000).replace(/(a)(b)/g, '$2$1').length".into(),
        r"return 'ab '.repeat(1000000).split(/(\s)/).length".into(),
        r"return 'ab'.repeat(2000000).match(/\w+x|\w/g).length".into(),
        r"return /[ab]*a[ab]{16}$/.test('ab'.repeat(2000000))".into(),
        r"return [...'ab'.repeat(200000).matchAll(/((a)|b)/g)].length".into(),
    ]
}

/// Every hostile shape, under a large budget, spends fuel no slower than 100 times a plain
/// loop's time per fuel (the goal is 10, the bound 50), and under the default budget it ends
/// (out of fuel or done) within a second.
#[test]
fn hostile_regexes_cost_time_in_proportion_to_fuel() {
    let shapes = shapes();
    let mut worst = (0.0, String::new());
    for code in &shapes {
        let base = loop_ns_per_fuel();
        let (ns, out) = ns_per_fuel(code, 300_000.0);
        if let Some(e) = &out.error {
            // (a shape that builds a value per match may meet the heap's ceiling first)
            assert!(
                matches!(e.kind, ErrorKind::OutOfFuel | ErrorKind::HeapLimit),
                "{}: {}",
                &code[..code.len().min(60)],
                e.message
            );
        }
        let ratio = ns / base;
        eprintln!(
            "{ratio:7.1}x  {:>9.0} ns/fuel  {:>10.1} fuel  {}",
            ns,
            out.fuel_used,
            &code[..code.len().min(70)]
        );
        if ratio > worst.0 {
            worst = (ratio, code.clone());
        }
        let t = Instant::now();
        let out = eval(code, json!({}), Options::default());
        let took = t.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "{code}: {took:?} under the default budget"
        );
        if let Some(e) = &out.error {
            assert_eq!(e.kind, ErrorKind::OutOfFuel, "{code}: {}", e.message);
        }
    }
    assert!(
        worst.0 <= 100.0,
        "{:.1}x a loop's time per fuel: {}",
        worst.0,
        worst.1
    );
}

/// A regex search that would run for minutes (every match re-reads the rest of a 4M-unit
/// string) ends at `timeoutMs` with the driver's timeout error, inside a single call.
const ENDLESS: &str = r"return 'ab'.repeat(2000000).match(/\w+x|\w/g).length";

#[test]
fn a_regex_search_ends_at_the_timeout() {
    let options = Options {
        fuel: 1e9,
        timeout_ms: 1000,
        ..Options::default()
    };
    let t = Instant::now();
    let out = rt().block_on(Eval::new(ENDLESS).options(options.clone()).run());
    let took = t.elapsed();
    let e = out.error.expect("timed out");
    assert_eq!(e.kind, ErrorKind::Timeout, "{}", e.message);
    assert!(
        e.message.starts_with("Execution timeout after 1000ms"),
        "{}",
        e.message
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    // the synchronous API too
    let t = Instant::now();
    let out = Eval::new(ENDLESS).options(options).run_sync();
    let took = t.elapsed();
    assert_eq!(out.error.expect("timed out").kind, ErrorKind::Timeout);
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// The host's cancellation stops a regex search in the middle of the call.
#[test]
fn a_regex_search_stops_when_cancelled() {
    let token = CancellationToken::new();
    let options = Options {
        fuel: 1e9,
        timeout_ms: 60_000,
        cancel: Some(token.clone()),
        ..Options::default()
    };
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        token.cancel();
    });
    let t = Instant::now();
    let out = rt().block_on(Eval::new(ENDLESS).options(options).run());
    let took = t.elapsed();
    canceller.join().unwrap();
    let e = out.error.expect("cancelled");
    assert_eq!(e.kind, ErrorKind::Cancelled, "{}", e.message);
    assert!(took < Duration::from_secs(2), "{took:?}");
}
