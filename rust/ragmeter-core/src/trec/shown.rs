//! How an error message shows the ids and fields of a TREC file it quotes.

use std::fmt::{self, Display, Write as _};

/// How the ids and fields an error message quotes are shown. A file read byte for byte
/// (see [`super::FileText`]) holds one character per byte of an encoding nobody knows
/// (Shift-JIS, cp1252, ...): printed as those Latin-1 characters, its bytes 0x80-0x9F
/// are invisible control characters (`{:?}` writes `\u{8d}`) and the others letters
/// that are not in the file. Its fields are shown as their bytes instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shown {
    /// As the text it is (UTF-8 files, tables).
    #[default]
    Text,
    /// Printable ASCII as it is, every other byte as `\xNN` (Python's `backslashreplace`).
    Bytes,
}

impl Shown {
    /// `field` as a message names it (an id: `query {}`).
    pub fn id(self, field: &str) -> Field<'_> {
        Field { field, shown: self, quoted: false }
    }

    /// `field` in double quotes, escaped as `{:?}` escapes text (a value that is not one: `relevance "x"`).
    pub fn quoted(self, field: &str) -> Field<'_> {
        Field { field, shown: self, quoted: true }
    }
}

/// A field as [`Shown`] shows it, written when the message is formatted.
pub struct Field<'a> {
    field: &'a str,
    shown: Shown,
    quoted: bool,
}

impl Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.shown, self.quoted) {
            (Shown::Text, false) => f.write_str(self.field),
            (Shown::Text, true) => write!(f, "{:?}", self.field),
            (Shown::Bytes, quoted) => {
                if quoted {
                    f.write_char('"')?;
                }
                for c in self.field.chars() {
                    write_byte_char(f, c, quoted)?;
                }
                if quoted {
                    f.write_char('"')?;
                }
                Ok(())
            }
        }
    }
}

/// One character of text read byte for byte: the byte it stands for. A character above
/// U+00FF (not from such a text) is shown as its UTF-8 bytes, never refused.
fn write_byte_char(f: &mut fmt::Formatter<'_>, c: char, quoted: bool) -> fmt::Result {
    match c {
        '"' | '\\' if quoted => write!(f, "\\{c}"),
        ' '..='~' => f.write_char(c),
        _ if u32::from(c) <= 0xFF => write!(f, "\\x{:02x}", u32::from(c)),
        _ => c.encode_utf8(&mut [0; 4]).bytes().try_for_each(|b| write!(f, "\\x{b:02x}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_shown_as_display_and_debug_show_it() {
        for field in ["x", "café", "a\"b\\c", "\u{8d}", "東京"] {
            assert_eq!(Shown::Text.id(field).to_string(), field);
            assert_eq!(Shown::Text.quoted(field).to_string(), format!("{field:?}"));
        }
    }

    #[test]
    fn bytes_are_shown_printable_ascii_as_is_others_as_backslash_x() {
        // "質問" in Shift-JIS is 8e bf 96 e2, read one character per byte.
        let sjis = "\u{8e}\u{bf}\u{96}\u{e2}";
        assert_eq!(Shown::Bytes.id(sjis).to_string(), "\\x8e\\xbf\\x96\\xe2");
        assert_eq!(Shown::Bytes.quoted(&format!("q{sjis}")).to_string(), "\"q\\x8e\\xbf\\x96\\xe2\"");
        assert_eq!(Shown::Bytes.id("d\u{1}\u{7f}~ ").to_string(), "d\\x01\\x7f~ ");
        assert_eq!(Shown::Bytes.quoted("a\"b\\c").to_string(), "\"a\\\"b\\\\c\"");
        assert_eq!(Shown::Bytes.id("a\"b\\c").to_string(), "a\"b\\c");
        assert_eq!(Shown::Bytes.id("é東").to_string(), "\\xe9\\xe6\\x9d\\xb1");
    }
}
