//! Response bodies as the guest reads them: content codings undone (gzip, deflate, brotli)
//! under a cap on the **decoded** bytes, and text decoded from the charset the content type
//! names.
//!
//! Decoding streams through a bounded reader: it stops one byte past the cap, so a small body
//! that would inflate to gigabytes (a decompression bomb) costs at most the cap in memory and
//! work before it is refused.

use std::borrow::Cow;
use std::io::Read;

/// The content codings the client asks for (`Accept-Encoding`) and decodes.
pub const ACCEPT_ENCODING: &str = "gzip, deflate, br";

/// Why a body could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Decoded, the body would pass the cap (bytes).
    TooLarge(usize),
    /// The coding is not one the client decodes, or the bytes are not valid in it.
    Invalid(String),
}

/// Undoes the codings of a `content-encoding` header (`gzip`, `x-gzip`, `deflate`, `br`,
/// `identity`; several are undone last first), producing at most `cap` bytes.
///
/// # Errors
/// [`DecodeError::TooLarge`] past the cap, [`DecodeError::Invalid`] for an unknown coding or
/// corrupt data.
pub fn decode_content(body: Vec<u8>, encoding: &str, cap: usize) -> Result<Vec<u8>, DecodeError> {
    let mut body = body;
    for coding in encoding
        .rsplit(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        let coding = coding.to_ascii_lowercase();
        body = match coding.as_str() {
            "identity" => body,
            "gzip" | "x-gzip" => bounded(flate2::read::MultiGzDecoder::new(&body[..]), cap, &coding)?,
            // HTTP's `deflate` is zlib-wrapped; some servers send the raw stream
            "deflate" => match bounded(flate2::read::ZlibDecoder::new(&body[..]), cap, &coding) {
                Err(DecodeError::Invalid(_)) => {
                    bounded(flate2::read::DeflateDecoder::new(&body[..]), cap, &coding)?
                }
                r => r?,
            },
            "br" => bounded(brotli_decompressor::Decompressor::new(&body[..], 8192), cap, &coding)?,
            other => {
                return Err(DecodeError::Invalid(format!(
                    "the response is encoded as '{other}', which the client does not decode (it decodes {ACCEPT_ENCODING}); send 'accept-encoding: identity' to get it unencoded"
                )))
            }
        };
    }
    Ok(body)
}

/// Reads `r` to the end, refusing once more than `cap` bytes come out.
fn bounded(r: impl Read, cap: usize, coding: &str) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    r.take(cap as u64 + 1).read_to_end(&mut out).map_err(|e| {
        DecodeError::Invalid(format!("the response's {coding} data is corrupt: {e}"))
    })?;
    if out.len() > cap {
        return Err(DecodeError::TooLarge(cap));
    }
    Ok(out)
}

/// The `charset` parameter of a content type, if any (quotes removed).
pub fn charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"'))
    })
}

/// The encoding a content type names (UTF-8 when it names none or one nobody knows).
pub fn encoding_of(content_type: Option<&str>) -> &'static encoding_rs::Encoding {
    content_type
        .and_then(charset)
        .and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8)
}

/// Most UTF-8 bytes `len` bytes in `encoding` decode to (a replacement character takes 3).
pub fn max_text_bytes(encoding: &'static encoding_rs::Encoding, len: usize) -> usize {
    encoding
        .new_decoder_without_bom_handling()
        .max_utf8_buffer_length(len)
        .unwrap_or(usize::MAX)
}

/// Bytes as text in `encoding` (a byte-order mark wins; invalid sequences become U+FFFD).
pub fn text<'a>(bytes: &'a [u8], encoding: &'static encoding_rs::Encoding) -> Cow<'a, str> {
    encoding.decode(bytes).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings_are_undone_and_a_bomb_stops_at_the_cap() {
        let plain = b"hello, world".repeat(10);
        assert_eq!(
            decode_content(gzip(&plain), "gzip", 1 << 20).unwrap(),
            plain
        );
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&plain).unwrap();
        assert_eq!(
            decode_content(z.finish().unwrap(), "deflate", 1 << 20).unwrap(),
            plain
        );
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(&plain).unwrap();
        assert_eq!(
            decode_content(raw.finish().unwrap(), "Deflate", 1 << 20).unwrap(),
            plain
        );
        // gzip inside identity: codings undone last first
        assert_eq!(
            decode_content(gzip(&plain), "gzip, identity", 1 << 20).unwrap(),
            plain
        );
        // 64 MiB of zeros in about 64 KB: refused at the cap
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 100_000, "{}", bomb.len());
        assert_eq!(
            decode_content(bomb, "gzip", 4 << 20),
            Err(DecodeError::TooLarge(4 << 20))
        );
        assert_eq!(decode_content(gzip(b"12345"), "gzip", 5).unwrap(), b"12345");
        assert_eq!(
            decode_content(gzip(b"123456"), "gzip", 5),
            Err(DecodeError::TooLarge(5))
        );
        assert!(
            matches!(decode_content(b"not gzip".to_vec(), "gzip", 100), Err(DecodeError::Invalid(m)) if m.contains("corrupt"))
        );
        assert!(
            matches!(decode_content(b"x".to_vec(), "zstd", 100), Err(DecodeError::Invalid(m)) if m.contains("'zstd'"))
        );
    }

    #[test]
    fn charsets_are_read_from_the_content_type() {
        assert_eq!(
            charset("text/plain; charset=ISO-8859-1"),
            Some("ISO-8859-1")
        );
        assert_eq!(charset("text/plain;charset=\"utf-8\""), Some("utf-8"));
        assert_eq!(charset("text/plain"), None);
        let latin1 = encoding_of(Some("text/plain; charset=iso-8859-1"));
        assert_eq!(text(b"caf\xe9", latin1), "café");
        assert!(max_text_bytes(latin1, 4) >= "café".len());
        assert_eq!(
            encoding_of(Some("text/plain; charset=bogus")),
            encoding_rs::UTF_8
        );
        assert_eq!(text(b"caf\xe9", encoding_rs::UTF_8), "caf\u{fffd}");
        assert_eq!(text("\u{feff}é".as_bytes(), latin1), "é");
    }
}
