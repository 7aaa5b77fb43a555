//! The built-in atoms' inputs read from the guest's object: `httpFetch`'s header values and
//! `responseType`.

use ajs_vm::JsValue;

/// What `httpFetch` hands back (decision 20 and the reference's `dataUrl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResponseType {
    /// The default: parsed JSON when the response says JSON, text otherwise.
    Json,
    /// The body as text, decoded from the response's charset.
    Text,
    /// `{ ok, status, headers, body }`; a JSON body that does not parse is kept as text and
    /// the parse error noted in `parseError`.
    Full,
    /// `data:<content-type>;base64,…`, for binary data.
    DataUrl,
}

impl ResponseType {
    /// Reads the `responseType` input (absent, `undefined` or `null`: the default).
    ///
    /// # Errors
    /// A value that is not one of the four, named.
    pub(crate) fn of(input: &JsValue) -> Result<ResponseType, String> {
        match field(input, "responseType") {
            None | Some(JsValue::Undefined | JsValue::Null) => Ok(ResponseType::Json),
            Some(JsValue::String(s)) => match s.as_str() {
                "json" => Ok(ResponseType::Json),
                "text" => Ok(ResponseType::Text),
                "full" => Ok(ResponseType::Full),
                "dataUrl" => Ok(ResponseType::DataUrl),
                other => Err(format!(
                    "httpFetch: responseType '{other}' is not one of 'json', 'text', 'full', 'dataUrl'"
                )),
            },
            Some(_) => Err("httpFetch: input 'responseType' must be a string".into()),
        }
    }
}

fn field<'a>(input: &'a JsValue, name: &str) -> Option<&'a JsValue> {
    match input {
        JsValue::Object(m) => m.get(name),
        _ => None,
    }
}

/// The request headers of `httpFetch`'s `headers` input, as JavaScript's `Headers` would send
/// them: strings as they are, numbers and booleans as their text, `undefined` members left out.
///
/// # Errors
/// A header whose value is `null`, an array or an object (JavaScript would send `null`,
/// `1,2` or `[object Object]`, never what was meant), named.
pub(crate) fn fetch_headers(input: &JsValue) -> Result<Vec<(String, String)>, String> {
    let Some(JsValue::Object(m)) = field(input, "headers") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(m.len());
    for (k, v) in m {
        match v {
            JsValue::Undefined => {}
            JsValue::String(_) | JsValue::Number(_) | JsValue::Bool(_) => {
                out.push((k.clone(), v.display()));
            }
            other => {
                return Err(format!(
                    "httpFetch: header '{k}' must be a string, number or boolean, got {}; write the value as a string",
                    match other {
                        JsValue::Null => "null",
                        JsValue::Array(_) => "an array",
                        _ => "an object",
                    }
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: serde_json::Value) -> JsValue {
        JsValue::from_json(&v)
    }

    #[test]
    fn response_types_and_header_values() {
        use serde_json::json;
        assert_eq!(ResponseType::of(&obj(json!({}))), Ok(ResponseType::Json));
        assert_eq!(
            ResponseType::of(&obj(json!({"responseType": "dataUrl"}))),
            Ok(ResponseType::DataUrl)
        );
        let e = ResponseType::of(&obj(json!({"responseType": "xml"}))).unwrap_err();
        assert!(e.contains("'xml'") && e.contains("'text'"), "{e}");
        let h = fetch_headers(&obj(json!({"headers": {"a": "x", "b": 2, "c": true}}))).unwrap();
        assert_eq!(
            h,
            vec![
                ("a".into(), "x".into()),
                ("b".into(), "2".into()),
                ("c".into(), "true".into())
            ]
        );
        for bad in [json!(null), json!([1, 2]), json!({"k": 1})] {
            let e = fetch_headers(&obj(json!({"headers": {"x-a": bad}}))).unwrap_err();
            assert!(
                e.starts_with("httpFetch: header 'x-a' must be a string"),
                "{e}"
            );
        }
    }
}
