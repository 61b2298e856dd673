//! The structure of JSON text without parsing it: each `{ } [ ] , :` that
//! stands outside a string literal. What walks compact JSON by its bytes
//! (its depth, the inbox's indentation of a wide payload) reads, so that
//! knowing where a string starts and ends (and that `\"` does not end it)
//! is written once.

/// Each structural byte of `text` (`{`, `}`, `[`, `]`, `,` or `:` outside a
/// string literal) with its index, in order. Text that is not JSON is
/// scanned the same way; a string left open hides the rest.
pub fn structure(text: &[u8]) -> Structure<'_> {
    Structure {
        text,
        at: 0,
        in_string: false,
        escaped: false,
    }
}

/// The iterator [`structure`] returns.
pub struct Structure<'a> {
    text: &'a [u8],
    at: usize,
    in_string: bool,
    escaped: bool,
}

impl Iterator for Structure<'_> {
    type Item = (usize, u8);

    fn next(&mut self) -> Option<(usize, u8)> {
        while let Some(&b) = self.text.get(self.at) {
            let i = self.at;
            self.at += 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'}' | b'[' | b']' | b',' | b':' => return Some((i, b)),
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        structure(text.as_bytes()).map(|(_, b)| b as char).collect()
    }

    #[test]
    fn only_what_stands_outside_strings() {
        assert_eq!(shown(r#"{"a":[1,2],"b":{}}"#), "{:[,],:{}}");
        assert_eq!(shown(r#"{"{[,:]}":"}"}"#), "{:}");
        // An escaped quote does not end the string; an escaped backslash
        // before a quote does.
        assert_eq!(shown(r#"["a\"],[", "b\\", 1]"#), "[,,]");
        assert_eq!(shown(r#"{"open"#), "{");
    }

    #[test]
    fn indexes_are_where_the_bytes_are() {
        let text = r#"{"k": [1]}"#;
        let found: Vec<(usize, u8)> = structure(text.as_bytes()).collect();
        for (i, b) in &found {
            assert_eq!(text.as_bytes()[*i], *b);
        }
        assert_eq!(found.len(), 5);
    }
}
