//! Host answers admitted before they are built: a fetched body is parsed straight into the
//! guest's host value ([`JsValue`]) under a byte budget — the room the run's heap has left
//! ([`ajs_vm::Vm::answer_room`]) — that counts every allocation before it is made. A body is
//! capped in bytes (`membraneMaxBytes`), but a body of tiny nodes (`[[],[],…]`) is many times
//! larger once parsed; without the budget one answer could make the host hold many times the
//! run's heap.
// without the built-in clients only the budget (`Room`) is used
#![cfg_attr(not(feature = "http"), allow(dead_code, unused_imports))]

use std::cell::Cell;
use std::fmt;
use std::mem::size_of;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ajs_io::HttpResponse;
use ajs_vm::{JsValue, MAX_BOUNDARY_DEPTH};
use indexmap::IndexMap;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::atom_inputs::ResponseType;

/// Bytes the host answers of one step may still take; the calls performed together share it.
#[derive(Clone, Debug)]
pub(crate) struct Room {
    left: Arc<AtomicUsize>,
    total: usize,
}

impl Room {
    /// A room of `bytes`.
    pub(crate) fn new(bytes: usize) -> Room {
        Room {
            left: Arc::new(AtomicUsize::new(bytes)),
            total: bytes,
        }
    }

    /// The room's size when it was made (named in the refusal).
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Takes `n` bytes, or refuses without taking any.
    fn take(&self, n: usize) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }

    /// Gives back `n` bytes (an allocation that was replaced by a larger one).
    fn give(&self, n: usize) {
        self.left.fetch_add(n, Ordering::Relaxed);
    }
}

/// Why a body gave no value.
#[derive(Debug)]
pub(crate) enum AnswerError {
    /// Parsed, it would take more than the room.
    Over,
    /// The body says JSON but does not parse (serde_json's message).
    Invalid(String),
}

/// Bytes the allocator takes for a request of `n` bytes (a header, 16-byte alignment).
fn alloc(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.saturating_add(8 + 15) & !15
    }
}

/// Bytes of an array's buffer of `cap` values.
fn vec_bytes(cap: usize) -> usize {
    alloc(cap.saturating_mul(size_of::<JsValue>()))
}

/// Bytes of an object's table of `cap` members: the entries (hash, key, value) and the hash
/// index (a power of two of slots, at most 7/8 full, a word and a control byte each).
fn map_bytes(cap: usize) -> usize {
    let entry = size_of::<usize>() + size_of::<String>() + size_of::<JsValue>();
    let slots = (cap.saturating_mul(8) / 7).max(cap).next_power_of_two();
    alloc(cap.saturating_mul(entry)).saturating_add(alloc(slots.saturating_mul(9) + 16))
}

/// The capacity a full container grows to next (doubling, at least 4).
fn grown(cap: usize) -> usize {
    cap.saturating_mul(2).max(4)
}

/// The seed of one value: takes from `room` before each allocation; `over` records a refusal
/// (so the caller tells it from a syntax error).
#[derive(Clone, Copy)]
struct Seed<'a> {
    room: &'a Room,
    over: &'a Cell<bool>,
}

/// Most levels of nesting serde_json parses on the caller's stack (its own default limit);
/// deeper bodies (up to [`MAX_BOUNDARY_DEPTH`]) are parsed on a thread with [`DEEP_STACK`].
const INLINE_DEPTH: usize = 128;

/// Stack of the thread that parses a body nested deeper than [`INLINE_DEPTH`].
const DEEP_STACK: usize = 64 << 20;

/// How deeply `text` nests its arrays and objects (brackets inside strings not counted).
fn nesting(text: &[u8]) -> usize {
    let (mut depth, mut most, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                most = most.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    most
}

impl Seed<'_> {
    fn take<E: de::Error>(&self, n: usize) -> Result<(), E> {
        if self.room.take(n) {
            Ok(())
        } else {
            self.over.set(true);
            Err(E::custom("over the host-answer room"))
        }
    }

    fn string<E: de::Error>(&self, s: &str) -> Result<String, E> {
        self.take(alloc(s.len()))?;
        Ok(s.to_owned())
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = JsValue;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<JsValue, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = JsValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_unit<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<JsValue, E> {
        Ok(JsValue::Bool(b))
    }

    #[allow(clippy::cast_precision_loss)]
    fn visit_i64<E>(self, n: i64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n as f64))
    }

    #[allow(clippy::cast_precision_loss)]
    fn visit_u64<E>(self, n: u64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n as f64))
    }

    fn visit_f64<E>(self, n: f64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<JsValue, E> {
        Ok(JsValue::String(self.string(s)?))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsValue, A::Error> {
        let mut items: Vec<JsValue> = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            if items.len() == items.capacity() {
                let cap = grown(items.capacity());
                self.take(vec_bytes(cap))?;
                items.reserve_exact(cap - items.len());
                self.room.give(vec_bytes(cap / 2));
            }
            items.push(v);
        }
        Ok(JsValue::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsValue, A::Error> {
        let mut m: IndexMap<String, JsValue> = IndexMap::new();
        while let Some(k) = map.next_key_seed(Key(self))? {
            let v = map.next_value_seed(self)?;
            if m.len() == m.capacity() && !m.contains_key(&k) {
                let cap = grown(m.capacity());
                self.take(map_bytes(cap))?;
                m.reserve_exact(cap - m.len());
                self.room.give(map_bytes(cap / 2));
            }
            // a repeated key keeps its first place and takes the last value (JSON.parse)
            m.insert(k, v);
        }
        Ok(JsValue::Object(m))
    }
}

/// The seed of an object's key: its bytes are taken before it is copied.
struct Key<'a>(Seed<'a>);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
        self.0.string(s)
    }
}

/// JSON text parsed into a host value, every allocation taken from `room` first, nested at most
/// [`MAX_BOUNDARY_DEPTH`] levels (the capability boundary's limit; deeper is `Invalid`).
///
/// # Errors
/// [`AnswerError::Over`] when the value would take more than the room, `Invalid` when the text
/// is not JSON.
pub(crate) fn parse_json(text: &[u8], room: &Room) -> Result<JsValue, AnswerError> {
    let depth = nesting(text);
    if depth > MAX_BOUNDARY_DEPTH {
        return Err(AnswerError::Invalid(format!(
            "nested deeper than {MAX_BOUNDARY_DEPTH} levels"
        )));
    }
    if depth <= INLINE_DEPTH {
        return parse_bounded(text, room);
    }
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("ajs-deep-json".into())
            .stack_size(DEEP_STACK)
            .spawn_scoped(s, || parse_bounded(text, room))
            .map_err(|e| AnswerError::Invalid(format!("no thread to parse it on: {e}")))?
            .join()
            .unwrap_or_else(|_| Err(AnswerError::Invalid("the parser failed".into())))
    })
}

/// [`parse_json`] on the current stack, serde_json's recursion limit lifted (the caller
/// checked the nesting).
fn parse_bounded(text: &[u8], room: &Room) -> Result<JsValue, AnswerError> {
    let over = Cell::new(false);
    let seed = Seed { room, over: &over };
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let parsed = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    match parsed {
        Ok(v) => Ok(v),
        Err(_) if over.get() => Err(AnswerError::Over),
        Err(e) => Err(AnswerError::Invalid(e.to_string())),
    }
}

/// The body as text in its charset (invalid sequences replaced), its bytes taken from `room`
/// first.
fn text(resp: &HttpResponse, room: &Room) -> Result<JsValue, AnswerError> {
    let encoding = resp.encoding();
    let bytes = &resp.body;
    let most = if encoding == encoding_rs::UTF_8 && std::str::from_utf8(bytes).is_ok() {
        bytes.len()
    } else {
        ajs_io::decode::max_text_bytes(encoding, bytes.len())
    };
    if !room.take(alloc(most)) {
        return Err(AnswerError::Over);
    }
    Ok(JsValue::String(
        ajs_io::decode::text(bytes, encoding).into_owned(),
    ))
}

/// A JSON body parsed (an empty one is `null`); text in another charset than UTF-8 is decoded
/// first.
fn json(resp: &HttpResponse, room: &Room) -> Result<JsValue, AnswerError> {
    if resp.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(JsValue::Null);
    }
    let encoding = resp.encoding();
    let parsed = if encoding == encoding_rs::UTF_8 {
        parse_json(&resp.body, room)
    } else {
        let most = ajs_io::decode::max_text_bytes(encoding, resp.body.len());
        if !room.take(alloc(most)) {
            return Err(AnswerError::Over);
        }
        let text = ajs_io::decode::text(&resp.body, encoding);
        let r = parse_json(text.as_bytes(), room);
        room.give(alloc(most));
        r
    };
    parsed.map_err(|e| match e {
        AnswerError::Invalid(m) => AnswerError::Invalid(format!(
            "httpFetch: the response says JSON but does not parse: {m} (ask for responseType 'text' or 'full' to read it anyway)"
        )),
        over => over,
    })
}

/// `data:<content-type>;base64,…` (the reference's `dataUrl`), its bytes taken from `room`.
fn data_url(resp: &HttpResponse, room: &Room) -> Result<JsValue, AnswerError> {
    use base64::Engine as _;
    let mime = resp
        .header("content-type")
        .unwrap_or("application/octet-stream")
        .replace(' ', "");
    let len = resp.body.len().div_ceil(3).saturating_mul(4);
    if !room.take(alloc(len.saturating_add(mime.len() + 13))) {
        return Err(AnswerError::Over);
    }
    let mut s = String::with_capacity(len + mime.len() + 13);
    s.push_str("data:");
    s.push_str(&mime);
    s.push_str(";base64,");
    base64::engine::general_purpose::STANDARD.encode_string(&resp.body, &mut s);
    Ok(JsValue::String(s))
}

/// The guest's result for a `responseType` (see [`ResponseType`]), admitted against `room`.
///
/// # Errors
/// As [`parse_json`]; with `Full` a body that does not parse is not an error.
pub(crate) fn guest_value(
    resp: &HttpResponse,
    response_type: ResponseType,
    room: &Room,
) -> Result<JsValue, AnswerError> {
    match response_type {
        ResponseType::Json if resp.is_json() => return json(resp, room),
        ResponseType::Json | ResponseType::Text => return text(resp, room),
        ResponseType::DataUrl => return data_url(resp, room),
        ResponseType::Full => {}
    }
    let mut m = IndexMap::new();
    m.insert(
        "ok".to_string(),
        JsValue::Bool((200..300).contains(&resp.status)),
    );
    m.insert("status".into(), JsValue::Number(f64::from(resp.status)));
    m.insert(
        "headers".into(),
        JsValue::from_json(&serde_json::Value::Object(resp.safe_headers())),
    );
    let body = if resp.is_json() {
        match json(resp, room) {
            Err(AnswerError::Invalid(e)) => {
                m.insert("parseError".into(), JsValue::String(e));
                text(resp, room)?
            }
            r => r?,
        }
    } else {
        text(resp, room)?
    };
    m.insert("body".into(), body);
    Ok(JsValue::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, room: usize) -> Result<JsValue, AnswerError> {
        parse_json(text.as_bytes(), &Room::new(room))
    }

    #[test]
    fn parses_as_serde_json_does() {
        for text in [
            r#"{"a":[1,2.5,"x\"y\n",null,true,false,{"k":-0.001}],"é":"😀","a":3}"#,
            "[]",
            "{}",
            "\"s\"",
            "12345678901234567890",
            "[[],[[]],{}]",
        ] {
            let want = JsValue::from_json(&serde_json::from_str(text).unwrap());
            assert_eq!(parse(text, usize::MAX).unwrap(), want, "{text}");
        }
        assert!(matches!(
            parse("[1,", usize::MAX),
            Err(AnswerError::Invalid(_))
        ));
        assert!(matches!(
            parse("[1] x", usize::MAX),
            Err(AnswerError::Invalid(_))
        ));
    }

    #[test]
    fn tiny_nodes_are_refused_before_they_are_built() {
        // 100,000 empty arrays: each node parsed costs far more than its three bytes of text
        let text = format!("[{}[]]", "[],".repeat(99_999));
        let need = 100_000 * size_of::<JsValue>();
        assert!(matches!(parse(&text, need / 2), Err(AnswerError::Over)));
        assert!(parse(&text, 4 * need).is_ok());
        let text = format!(
            "{{{}\"z\":0}}",
            (0..50_000)
                .map(|i| format!("\"{i}\":0,"))
                .collect::<String>()
        );
        assert!(matches!(parse(&text, 1 << 20), Err(AnswerError::Over)));
        assert!(parse(&text, 64 << 20).is_ok());
    }

    #[test]
    fn the_room_is_shared_and_only_taken_when_it_fits() {
        let room = Room::new(1000);
        assert!(room.take(600));
        assert!(!room.take(600));
        assert!(room.take(400));
        assert!(!room.take(1));
        let room = Room::new(3000);
        let text =
            b"\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"";
        let mut n = 0;
        while parse_json(text, &room).is_ok() {
            n += 1;
        }
        assert!((20..=40).contains(&n), "{n} strings of 75 bytes in 3000");
    }

    #[test]
    fn bodies_nest_as_deep_as_the_boundary_allows_and_no_deeper() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep(1000), usize::MAX).is_ok());
        assert!(parse(&format!("{{\"a\":{}}}", deep(999)), usize::MAX).is_ok());
        match parse(&deep(1001), usize::MAX) {
            Err(AnswerError::Invalid(m)) => assert!(m.contains("deeper than 1000"), "{m}"),
            other => panic!("{other:?}"),
        }
        // brackets inside strings do not count
        assert!(parse(&format!("[\"{}\"]", "[".repeat(5000)), usize::MAX).is_ok());
        assert_eq!(nesting(br#"["\"[", {"a": [1]}]"#), 3);
    }
}
