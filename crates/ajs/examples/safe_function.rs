//! Compile a rule once, call it many times: `cargo run -p ajs --example safe_function`.

use ajs::{Options, SafeFunction};

fn main() -> Result<(), ajs::Error> {
    let rule = "if (qty >= 10) {\n  return price * qty * 0.9\n}\nreturn price * qty";
    let options = Options {
        fuel: 100.0,
        ..Options::default()
    };
    // creation is the only step that can fail to compile; `?` turns it into an `ajs::Error`
    let price = SafeFunction::new(&["price", "qty"], rule, options)?;
    for (p, q) in [(4.0, 2), (4.0, 10), (0.5, 100)] {
        // any serde sequence is an argument list: a tuple here
        let total = price.call_with_sync(&(p, q)).into_result()?;
        let total: f64 = ajs::from_value(&total).expect("a number");
        println!("{q} at {p}: {total}");
    }
    let broken = SafeFunction::new(&["a"], "return a +", Options::default());
    let e: ajs::Error = broken.unwrap_err().into();
    println!(
        "a broken rule: {e} (line {:?}, column {:?})",
        e.line(),
        e.column()
    );
    Ok(())
}
