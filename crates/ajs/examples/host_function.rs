//! A typed host function: serde types in and out, the run's context, a catchable error, and a
//! panic that ends the run instead of the caller: `cargo run -p ajs --example host_function`.

use ajs::{AtomDecl, Capabilities, ErrorKind, Eval, HostContext, HostError, Options};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize)]
struct Lookup {
    sku: String,
    #[serde(default)]
    qty: u32,
}

#[derive(Serialize)]
struct Stock {
    sku: String,
    available: u32,
    enough: bool,
}

async fn stock(ctx: HostContext, q: Lookup) -> Result<Stock, HostError> {
    if ctx.is_cancelled() {
        return Err(HostError::new("cancelled"));
    }
    let available = match q.sku.as_str() {
        "A1" => 12,
        "B2" => 0,
        other => return Err(HostError::new(format!("unknown sku '{other}'"))),
    };
    Ok(Stock {
        sku: q.sku,
        available,
        enough: available >= q.qty,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ajs::Error> {
    let caps = Capabilities::default()
        .host_fn(AtomDecl::new("stock").fuel(2.0), stock)
        .host_fn_sync(
            AtomDecl::new("broken"),
            |_ctx, _: serde_json::Value| -> Result<u8, HostError> { panic!("a bug in the host") },
        );
    let options = Options {
        capabilities: caps,
        ..Options::default()
    };
    let code = "let a = stock({ sku: 'A1', qty: 5 })\n\
                let b = 'none'\n\
                try { b = stock({ sku: 'Z9' }) } catch (e) { b = 'caught: ' + e }\n\
                return { a, b }";
    let out = Eval::new(code).options(options.clone()).run().await;
    let v = out.into_result()?;
    println!("{}", v.display());
    assert_eq!(
        v.to_json(),
        Some(
            json!({ "a": { "sku": "A1", "available": 12, "enough": true }, "b": "caught: unknown sku 'Z9'" })
        )
    );

    // the panic is caught: the run ends with HostPanic, this program goes on
    let e = Eval::new("broken({})")
        .options(options)
        .run()
        .await
        .into_result()
        .expect_err("the host function panics");
    assert_eq!(e.kind, ErrorKind::HostPanic);
    println!("a panicking host function: {e}");
    Ok(())
}
