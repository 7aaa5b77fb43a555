//! Run a snippet once with limits: `cargo run -p ajs --example eval [CODE]`.
//!
//! The code sees only the context; every failure is an `ajs::Error` with a kind.

use ajs::{ErrorKind, Eval};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let code = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "price * qty".to_string());
    let out = Eval::new(&code)
        .context(json!({ "price": 2.5, "qty": 4 }))
        .fuel(1000.0)
        .timeout_ms(1000)
        .run_sync();
    println!("fuel used: {}", out.fuel_used);
    match out.into_result() {
        Ok(v) => println!("result: {}", v.display()),
        Err(e) if e.kind == ErrorKind::Compile => {
            println!("does not compile ({}): {e}", e.kind);
            return Ok(());
        }
        Err(e) => println!("failed ({}): {e}", e.kind),
    }

    // A snippet that loops forever stops at its fuel budget.
    let e = Eval::new("let i = 0\nwhile (true) { i = i + 1 }\nreturn i")
        .fuel(50.0)
        .run_sync()
        .into_result()
        .expect_err("the loop runs out of fuel");
    assert_eq!(e.kind, ErrorKind::OutOfFuel);
    println!("an endless loop: {e}");
    Ok(())
}
