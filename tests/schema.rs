//! `filter(data, schemaOrExample)` and `Schema.*` (decision 21).

use crate::common;

use serde_json::json;

#[test]
fn filter_validates_and_strips() {
    let ok = |code: &str| common::ok(code, json!({}));
    assert_eq!(
        ok("filter({ name: 'a', age: 3, extra: 1 }, { name: '', age: 0 })"),
        Some(json!({ "name": "a", "age": 3 }))
    );
    assert_eq!(
        ok("filter([{ a: 1, b: 2 }], [{ a: 0 }])"),
        Some(json!([{ "a": 1 }]))
    );
    assert_eq!(
        ok("filter({ n: 1, m: 2 }, { type: 'object', properties: { n: { type: 'integer' } } })"),
        Some(json!({ "n": 1 }))
    );
    assert_eq!(
        common::err("filter({ name: 'a' }, { name: '', age: 0 })", json!({})),
        "root: Missing age"
    );
    assert_eq!(
        common::err("filter({ n: 'x' }, { n: 1 })", json!({})),
        "root.n: expected integer, got string"
    );
    assert_eq!(
        ok("try { filter({}, { a: 1 }) } catch (e) { return e }"),
        Some(json!("root: Missing a"))
    );
    assert_eq!(
        ok("Schema.isValid({ n: 'x' }, { n: 1 })"),
        Some(json!(false))
    );
}

#[test]
fn schemas_from_examples() {
    assert_eq!(
        common::ok("Schema.fromExample({ a: 1, b: [1.5], c: 'x' })", json!({})),
        Some(json!({
            "type": "object",
            "properties": { "a": { "type": "integer" }, "b": { "type": "array", "items": { "type": "number" } }, "c": { "type": "string" } },
            "required": ["a", "b", "c"],
            "additionalProperties": false
        }))
    );
    assert_eq!(
        common::ok("Schema.response('out', { n: 1 })", json!({})).unwrap()["json_schema"]["strict"],
        json!(true)
    );
}

#[test]
fn filter_pays_per_node() {
    let cost = |n: usize| {
        let items: Vec<_> = (0..n).map(|i| json!({ "a": i, "b": i })).collect();
        common::eval_with(
            "filter(xs, [{ a: 0 }]).length",
            json!({ "xs": items }),
            ajs::Options {
                fuel: 1e6,
                ..Default::default()
            },
        )
        .fuel_used
    };
    let (small, big) = (cost(100), cost(10_000));
    assert!(big > 10.0 * small, "{small} -> {big}");
}
