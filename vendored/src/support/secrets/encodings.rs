//! The encoded forms of a secret that redaction looks for, and the one-level
//! decoding it reads text with.
//!
//! Two kinds of form:
//! - Forms found by decoding the text while matching: at each position a
//!   character may be written as itself, `%HH` (any case, UTF-8 bytes),
//!   `+` for a space, or a JSON escape (`\"`, `\\`, `\/`, `\n`, `\uXXXX`,
//!   surrogate pairs). That covers every percent-encoding and every JSON
//!   escaping style, and mixtures of them, with one pattern per secret.
//! - Forms that must be computed: hex of the UTF-8 bytes, and base64
//!   (standard and URL-safe, padded and not, and the part of it that is
//!   fixed by the secret alone at each of the three byte alignments inside a
//!   longer blob, as in `Basic base64(user:secret)`).

use ::base64::Engine as _;
use ::base64::engine::GeneralPurpose;
use ::base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

/// `bytes` in base64; `url_safe` picks the `-_` alphabet.
pub fn base64(bytes: &[u8], url_safe: bool, pad: bool) -> String {
    let engine: &GeneralPurpose = match (url_safe, pad) {
        (false, true) => &STANDARD,
        (false, false) => &STANDARD_NO_PAD,
        (true, true) => &URL_SAFE,
        (true, false) => &URL_SAFE_NO_PAD,
    };
    engine.encode(bytes)
}

/// Every base64 form of `secret` worth looking for, longest first, without
/// duplicates: the whole encoding (padded, unpadded) in both alphabets, and
/// for each alignment `k` (the secret starting `k` bytes into a 3-byte
/// group) the characters that depend on the secret's bytes only.
pub fn base64_forms(secret: &[u8]) -> Vec<String> {
    let mut forms = Vec::new();
    for url_safe in [false, true] {
        forms.push(base64(secret, url_safe, true));
        forms.push(base64(secret, url_safe, false));
        for k in 0..3usize {
            let mut shifted = vec![0u8; k];
            shifted.extend_from_slice(secret);
            let encoded = base64(&shifted, url_safe, false);
            // Character i covers bits [6i, 6i + 6) of the shifted bytes; keep
            // those entirely inside the secret's bits [8k, 8(k + n)).
            let first = (8 * k).div_ceil(6);
            let end = (8 * (k + secret.len())) / 6;
            if end > first {
                forms.push(encoded[first..end].to_string());
            }
        }
    }
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let mut seen = std::collections::HashSet::new();
    forms.retain(|f| seen.insert(f.clone()));
    forms
}

/// The characters the text at byte `at` can stand for, with where each
/// reading ends: the character itself and, when `decode`, what a `+`, a
/// `%HH` sequence or a JSON escape starting there decodes to. `at` must be a
/// character boundary; every end is one.
pub fn readings(text: &str, at: usize, decode: bool) -> Readings {
    let mut out = Readings::default();
    let Some(ch) = text.get(at..).and_then(|rest| rest.chars().next()) else {
        return out;
    };
    out.push(ch, at + ch.len_utf8());
    if !decode {
        return out;
    }
    let bytes = text.as_bytes();
    match ch {
        '+' => out.push(' ', at + 1),
        '%' => {
            if let Some((c, end)) = percent_char(bytes, at) {
                out.push(c, end);
            }
        }
        '\\' => {
            if let Some((c, end)) = json_escape(bytes, at) {
                out.push(c, end);
            }
        }
        _ => {}
    }
    out
}

/// At most two readings of one position (the character, one decoding).
#[derive(Debug, Default, Clone, Copy)]
pub struct Readings {
    items: [(char, usize); 2],
    len: usize,
}

impl Readings {
    fn push(&mut self, ch: char, end: usize) {
        if self.len < self.items.len() {
            self.items[self.len] = (ch, end);
            self.len += 1;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (char, usize)> + '_ {
        self.items[..self.len].iter().copied()
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn percent_byte(bytes: &[u8], at: usize) -> Option<u8> {
    if bytes.get(at) != Some(&b'%') {
        return None;
    }
    let hi = hex_digit(*bytes.get(at + 1)?)?;
    let lo = hex_digit(*bytes.get(at + 2)?)?;
    Some(hi << 4 | lo)
}

/// One character written as `%HH` per UTF-8 byte.
fn percent_char(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let lead = percent_byte(bytes, at)?;
    let n = match lead {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return None,
    };
    let mut buf = [lead, 0, 0, 0];
    for (i, slot) in buf.iter_mut().enumerate().take(n).skip(1) {
        *slot = percent_byte(bytes, at + 3 * i)?;
    }
    let c = std::str::from_utf8(&buf[..n]).ok()?.chars().next()?;
    Some((c, at + 3 * n))
}

fn json_unit(bytes: &[u8], at: usize) -> Option<u16> {
    if bytes.get(at) != Some(&b'\\') || bytes.get(at + 1) != Some(&b'u') {
        return None;
    }
    let mut unit = 0u16;
    for i in 0..4 {
        unit = unit << 4 | u16::from(hex_digit(*bytes.get(at + 2 + i)?)?);
    }
    Some(unit)
}

/// One JSON string escape: a short one or `\uXXXX` (a surrogate pair for a
/// character beyond the BMP).
fn json_escape(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let short = match bytes.get(at + 1)? {
        b'"' => Some('"'),
        b'\\' => Some('\\'),
        b'/' => Some('/'),
        b'b' => Some('\u{8}'),
        b'f' => Some('\u{c}'),
        b'n' => Some('\n'),
        b'r' => Some('\r'),
        b't' => Some('\t'),
        _ => None,
    };
    if let Some(c) = short {
        return Some((c, at + 2));
    }
    let unit = json_unit(bytes, at)?;
    if (0xd800..0xdc00).contains(&unit) {
        let low = json_unit(bytes, at + 6)?;
        if !(0xdc00..0xe000).contains(&low) {
            return None;
        }
        let code = 0x10000 + ((u32::from(unit) - 0xd800) << 10) + (u32::from(low) - 0xdc00);
        return Some((char::from_u32(code)?, at + 12));
    }
    Some((char::from_u32(u32::from(unit))?, at + 6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes(), false, true), encoded);
            assert_eq!(
                base64(plain.as_bytes(), false, false),
                encoded.trim_end_matches('=')
            );
        }
        assert_eq!(base64(&[0xfb, 0xff], false, true), "+/8=");
        assert_eq!(base64(&[0xfb, 0xff], true, false), "-_8");
    }

    #[test]
    fn an_aligned_form_is_inside_any_blob_holding_the_secret() {
        let secret = b"s3cr3t-value!";
        let forms = base64_forms(secret);
        for prefix in ["", "u:", "us:", "user:", "a much longer prefix:"] {
            let mut blob = prefix.as_bytes().to_vec();
            blob.extend_from_slice(secret);
            blob.extend_from_slice(b" and more");
            for url_safe in [false, true] {
                let encoded = base64(&blob, url_safe, true);
                assert!(
                    forms.iter().any(|f| f.len() >= 14 && encoded.contains(f)),
                    "{prefix:?}: {encoded} holds none of {forms:?}"
                );
            }
        }
    }

    #[test]
    fn readings_decode_percent_plus_and_json_escapes() {
        let read = |text: &str| readings(text, 0, true).iter().collect::<Vec<_>>();
        assert_eq!(read("%2b"), vec![('%', 1), ('+', 3)]);
        assert_eq!(read("%C3%A9x"), vec![('%', 1), ('é', 6)]);
        assert_eq!(read("+"), vec![('+', 1), (' ', 1)]);
        assert_eq!(read("\\/"), vec![('\\', 1), ('/', 2)]);
        assert_eq!(read("\\u00E9"), vec![('\\', 1), ('é', 6)]);
        assert_eq!(read("\\ud83d\\ude00"), vec![('\\', 1), ('😀', 12)]);
        assert_eq!(read("\\ud83d"), vec![('\\', 1)], "a lone surrogate");
        assert_eq!(read("%zz"), vec![('%', 1)]);
        assert_eq!(read("%C3"), vec![('%', 1)], "a cut UTF-8 sequence");
        assert_eq!(readings("%41", 0, false).iter().count(), 1);
    }
}
