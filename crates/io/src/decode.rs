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
