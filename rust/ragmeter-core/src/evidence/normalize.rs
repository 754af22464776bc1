//! Text normalisation for matching (see the module docs of `evidence`) and file-name canonical forms.

use unicode_normalization::UnicodeNormalization;


use std::sync::OnceLock;

use unicode_normalization::char::{canonical_combining_class, decompose_canonical, decompose_compatible};

/// How the fast path of [`Normalizer::run`] treats a BMP code point.
///
/// NFKC of a text is the concatenation of NFKC of its pieces when the text is
/// cut only before characters with a *composition boundary before* them: the
/// compatibility decomposition starts with a starter (combining class 0)
/// that never combines with what precedes it (never a non-initial element
/// of a canonical decomposition, which covers Hangul vowel and trailing
/// jamo). Nothing before such a character can reorder or compose with
/// anything after it. So a character with a boundary before it *and* before
/// its successor is normalised on its own, from the table.
const SLOW: u8 = 0;
/// Boundary before; NFKC, lower-casing, white-space and hyphen rules leave it
/// as it is (ASCII is always treated so: its case and white space are handled
/// byte-wise by [`Normalizer::direct`]).
const COPY: u8 = 1;
/// Boundary before; alone it normalises to [`Table::mapped`] (pushed through
/// the per-character rules).
const MAPPED: u8 = 2;

/// The per-code-point classes of the BMP and, for `MAPPED`, NFKC of the
/// character alone. Built once per process (tens of milliseconds) from the
/// same Unicode data the slow path uses, so both agree by construction.
pub(super) struct Table {
    class: Vec<u8>,
    /// For a `MAPPED` code point: `start << 8 | len` into `chars`.
    map: Vec<u32>,
    chars: Vec<char>,
    /// For a `MAPPED` code point whose NFKC has no white space, invisible
    /// character or hyphen: `start << 8 | len` into `bytes`, the UTF-8 of its
    /// NFKC already lower-cased (0 otherwise: pushed character by character).
    plain: Vec<u32>,
    bytes: Vec<u8>,
}

impl Table {
    fn build() -> Table {
        // Characters that may combine with a preceding one: non-initial
        // elements of any canonical decomposition (a superset of the second
        // elements of the primary composites).
        let mut combines_back = vec![false; 0x11_0000];
        let mut parts = Vec::new();
        for y in (0u32..0x11_0000).filter_map(char::from_u32) {
            parts.clear();
            decompose_canonical(y, |d| parts.push(d));
            for &d in parts.iter().skip(1) {
                combines_back[d as usize] = true;
            }
        }
        let mut class = vec![SLOW; 0x1_0000];
        let mut map = vec![0u32; 0x1_0000];
        let mut chars = Vec::new();
        let mut plain = vec![0u32; 0x1_0000];
        let mut bytes = Vec::new();
        for c in (0u32..0x1_0000).filter_map(char::from_u32) {
            let cp = c as usize;
            if c.is_ascii() {
                class[cp] = COPY;
                continue;
            }
            let mut first = None;
            decompose_compatible(c, |d| {
                first.get_or_insert(d);
            });
            let first = first.expect("a decomposition is never empty");
            if canonical_combining_class(first) != 0 || combines_back[first as usize] {
                continue;
            }
            let alone: Vec<char> = std::iter::once(c).nfkc().collect();
            let unchanged = alone == [c]
                && c.to_lowercase().eq(std::iter::once(c))
                && !c.is_whitespace()
                && !is_invisible(c)
                && c != '\u{2010}'
                && c != 'ς';
            if unchanged {
                class[cp] = COPY;
            } else {
                class[cp] = MAPPED;
                map[cp] = (chars.len() as u32) << 8 | alone.len() as u32;
                if alone.iter().all(|&a| !a.is_whitespace() && !is_invisible(a) && a != '-' && a != '\u{2010}') {
                    let lowered: String = alone.iter().flat_map(|&a| if a == 'ς' { 'σ'.to_lowercase() } else { a.to_lowercase() }).collect();
                    plain[cp] = (bytes.len() as u32) << 8 | lowered.len() as u32;
                    bytes.extend_from_slice(lowered.as_bytes());
                }
                chars.extend(alone);
            }
        }
        Table { class, map, chars, plain, bytes }
    }

    pub(super) fn get() -> &'static Table {
        static TABLE: OnceLock<Table> = OnceLock::new();
        TABLE.get_or_init(Table::build)
    }

    /// Class and byte length of the character starting at `b[i]` (valid UTF-8).
    #[inline]
    fn class_at(&self, b: &[u8], i: usize) -> (u8, usize) {
        let lead = b[i];
        match lead {
            0x00..=0x7F => (COPY, 1),
            0xC0..=0xDF => (self.class[((lead as usize & 0x1F) << 6) | (b[i + 1] as usize & 0x3F)], 2),
            0xE0..=0xEF => (self.class[decode3(b, i) as usize], 3),
            // Outside the BMP: always through NFKC (joins the segment before it).
            _ => (SLOW, 4),
        }
    }

    /// NFKC of a `MAPPED` code point on its own.
    #[inline]
    fn mapped(&self, cp: u32) -> &[char] {
        let m = self.map[cp as usize];
        let start = (m >> 8) as usize;
        &self.chars[start..start + (m & 0xFF) as usize]
    }

    #[cfg(test)]
    pub(super) fn is_copy(&self, c: char) -> bool {
        (c as u32) < 0x1_0000 && self.class[c as usize] == COPY
    }

    #[cfg(test)]
    pub(super) fn has_boundary_before(&self, c: char) -> bool {
        (c as u32) < 0x1_0000 && self.class[c as usize] != SLOW
    }
}

#[inline]
fn decode3(b: &[u8], i: usize) -> u32 {
    ((b[i] as u32 & 0x0F) << 12) | ((b[i + 1] as u32 & 0x3F) << 6) | (b[i + 2] as u32 & 0x3F)
}

#[inline]
fn decode2(b: &[u8], i: usize) -> u32 {
    ((b[i] as u32 & 0x1F) << 6) | (b[i + 1] as u32 & 0x3F)
}

/// Line-break characters (a subset of `White_Space`).
#[inline]
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Invisible format characters removed like white space.
#[inline]
pub(super) fn is_invisible(c: char) -> bool {
    matches!(c, '\u{AD}' | '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{FEFF}')
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hyphen {
    None,
    /// A hyphen (byte position, byte length in the output) directly after a non-space.
    Seen(usize, usize),
    /// ... followed by optional spaces and a line break.
    Broken(usize, usize),
}

/// Reusable normaliser: the output buffer and the line-break hyphens found in it.
#[derive(Default)]
pub struct Normalizer {
    /// Normalised UTF-8 bytes of the last text.
    pub out: Vec<u8>,
    /// Byte ranges (start, len) in `out` of line-break hyphens.
    soft: Vec<(usize, usize)>,
    state: Option<Hyphen>,
    prev_ws: bool,
}

impl Normalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Normalise `text` into `self.out` (cleared first).
    ///
    /// The text is cut before every character with a composition boundary
    /// before it (see [`Table`]), into segments of one such character and
    /// the characters without one that follow it. A one-character segment
    /// comes from the table: `COPY` characters in maximal runs, lower-cased
    /// and stripped of white space in bulk by [`Self::direct`], `MAPPED` ones
    /// from their stored NFKC; longer segments (a base and its combining
    /// marks, a Hangul syllable and a trailing jamo, anything outside the
    /// BMP) go through NFKC.
    pub fn run(&mut self, text: &str) {
        self.out.clear();
        self.soft.clear();
        self.state = Some(Hyphen::None);
        self.prev_ws = true; // "no previous character": a leading hyphen is not a line-break hyphen
        self.out.reserve(text.len());
        let table = Table::get();
        let b = text.as_bytes();
        let n = b.len();
        let mut i = 0;
        // Start of the segment not yet emitted.
        let mut pending: Option<usize> = None;
        while i < n {
            let (class, len) = table.class_at(b, i);
            if class == SLOW {
                pending.get_or_insert(i);
                i += len;
                continue;
            }
            if let Some(s) = pending.take() {
                self.segment(table, text, s, i);
            }
            if class == MAPPED {
                pending = Some(i);
                i += len;
                continue;
            }
            // A run of COPY characters: all but the last are one-character
            // segments; the last one waits for what follows it.
            let (run_end, last_start) = copy_run(table, b, i);
            let direct_end = if run_end == n { n } else { last_start };
            if direct_end > i {
                self.direct(&b[i..direct_end]);
            }
            if direct_end < run_end {
                pending = Some(direct_end);
            }
            i = run_end;
        }
        if let Some(s) = pending {
            self.segment(table, text, s, n);
        }
    }

    /// Emit the segment `text[s..e]` (it starts at a boundary or at the text start).
    #[inline]
    fn segment(&mut self, table: &Table, text: &str, s: usize, e: usize) {
        let b = text.as_bytes();
        let (class, len) = table.class_at(b, s);
        if s + len != e || class == SLOW {
            self.slow(&text[s..e]);
        } else if class == COPY {
            self.direct(&b[s..e]);
        } else {
            let cp = if len == 2 { decode2(b, s) } else { decode3(b, s) };
            let plain = table.plain[cp as usize];
            if plain != 0 {
                self.non_space();
                let start = (plain >> 8) as usize;
                self.out.extend_from_slice(&table.bytes[start..start + (plain & 0xFF) as usize]);
            } else {
                for &c in table.mapped(cp) {
                    self.push(c);
                }
            }
        }
    }

    /// Bytes of `COPY` characters only: lower-case ASCII, drop white space,
    /// track hyphens; other bytes are copied (`to_ascii_lowercase`
    /// leaves bytes >= 0x80 alone). Split at each `-` (the only byte that can
    /// start a line-break hyphen), the pieces go through [`Self::bulk`].
    fn direct(&mut self, s: &[u8]) {
        let mut rest = s;
        while let Some(p) = memchr::memchr(b'-', rest) {
            self.bulk(&rest[..p]);
            self.push_ascii(b'-');
            rest = &rest[p + 1..];
        }
        self.bulk(rest);
    }

    /// Stable bytes without `-`: leading white space through the state
    /// machine, then the first non-space settles the hyphen state (a pending
    /// line-break hyphen is recorded), after which the state stays `None`
    /// whatever white space follows, so the rest is a branch-free copy of the
    /// lower-cased non-space bytes.
    fn bulk(&mut self, s: &[u8]) {
        let mut j = 0;
        while j < s.len() && !KEEP[s[j] as usize] {
            self.push_ascii(s[j]);
            j += 1;
        }
        if j == s.len() {
            return;
        }
        self.non_space();
        let rest = &s[j..];
        let len0 = self.out.len();
        self.out.reserve(rest.len());
        let mut w = 0usize;
        // SAFETY: capacity for `rest.len()` more bytes was reserved; at most
        // one byte is written per input byte, and `w <= rest.len()`.
        // Eight bytes at a time when none is ASCII (CJK text): kept as they are.
        unsafe {
            let dst = self.out.as_mut_ptr().add(len0);
            let mut k = 0;
            while k < rest.len() {
                if k + 8 <= rest.len() {
                    let word = (rest.as_ptr().add(k) as *const u64).read_unaligned();
                    if word & 0x8080_8080_8080_8080 == 0x8080_8080_8080_8080 {
                        // In bounds: `w <= k` and `k + 8 <= rest.len()`.
                        (dst.add(w) as *mut u64).write_unaligned(word);
                        w += 8;
                        k += 8;
                        continue;
                    }
                }
                let c = *rest.get_unchecked(k);
                *dst.add(w) = LOWER[c as usize];
                w += KEEP[c as usize] as usize;
                k += 1;
            }
            self.out.set_len(len0 + w);
        }
        self.prev_ws = !KEEP[*rest.last().expect("non-empty") as usize];
    }

    /// True when the last text had at least one line-break hyphen.
    pub fn has_soft_hyphens(&self) -> bool {
        !self.soft.is_empty()
    }

    /// Write the last text without its line-break hyphens into `buf` (cleared first).
    pub fn dehyphenated_into(&self, buf: &mut Vec<u8>) {
        buf.clear();
        let mut from = 0;
        for &(start, len) in &self.soft {
            buf.extend_from_slice(&self.out[from..start]);
            from = start + len;
        }
        buf.extend_from_slice(&self.out[from..]);
    }

    fn slow(&mut self, segment: &str) {
        for c in segment.nfkc() {
            self.push(c);
        }
    }

    #[inline]
    fn push(&mut self, c: char) {
        if c.is_ascii() {
            self.push_ascii(c as u8);
        } else if c.is_whitespace() {
            self.white(is_line_break(c));
        } else if is_invisible(c) {
            self.non_space();
        } else if c == '\u{2010}' {
            self.hyphen(c);
        } else if c == 'ς' {
            self.push_other('σ');
        } else {
            self.non_space();
            let mut buf = [0u8; 4];
            for l in c.to_lowercase() {
                self.out.extend_from_slice(l.encode_utf8(&mut buf).as_bytes());
            }
        }
    }

    #[inline]
    fn push_ascii(&mut self, b: u8) {
        match b {
            b' ' | b'\t' => self.white(false),
            b'\n' | 0x0B | 0x0C | b'\r' => self.white(true),
            b'-' => self.hyphen('-'),
            _ => {
                self.non_space();
                self.out.push(b.to_ascii_lowercase());
            }
        }
    }

    /// A non-space character without case mapping.
    #[inline]
    fn push_other(&mut self, c: char) {
        self.non_space();
        let mut buf = [0u8; 4];
        self.out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }

    /// State update for any non-white-space character (emitted or not).
    #[inline]
    fn non_space(&mut self) {
        if let Some(Hyphen::Broken(s, l)) = self.state {
            self.soft.push((s, l));
        }
        self.state = Some(Hyphen::None);
        self.prev_ws = false;
    }

    #[inline]
    fn white(&mut self, line_break: bool) {
        self.state = match self.state {
            Some(Hyphen::Seen(s, l)) if line_break => Some(Hyphen::Broken(s, l)),
            Some(Hyphen::Seen(s, l)) => Some(Hyphen::Seen(s, l)),
            Some(Hyphen::Broken(s, l)) => Some(Hyphen::Broken(s, l)),
            _ => Some(Hyphen::None),
        };
        self.prev_ws = true;
    }

    #[inline]
    fn hyphen(&mut self, c: char) {
        let after_space = self.prev_ws;
        self.non_space();
        let start = self.out.len();
        let mut buf = [0u8; 4];
        self.out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        if !after_space {
            self.state = Some(Hyphen::Seen(start, c.len_utf8()));
        }
    }
}

/// Bytes kept by [`Normalizer::bulk`]: anything but ASCII white space
/// (non-ASCII bytes there belong to stable characters).
static KEEP: [bool; 256] = {
    let mut t = [true; 256];
    t[b' ' as usize] = false;
    t[b'\t' as usize] = false;
    t[b'\n' as usize] = false;
    t[0x0B] = false;
    t[0x0C] = false;
    t[b'\r' as usize] = false;
    t
};

/// ASCII lower-casing as a table (bytes >= 0x80 unchanged).
static LOWER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (i as u8).to_ascii_lowercase();
        i += 1;
    }
    t
};

/// The maximal run of `COPY` characters starting at byte `i`: returns its end
/// and the start of its last character.
#[inline]
fn copy_run(table: &Table, b: &[u8], i: usize) -> (usize, usize) {
    let n = b.len();
    let mut j = i;
    let mut last = i;
    while j < n {
        // Eight ASCII bytes at a time.
        if j + 8 <= n {
            let w = u64::from_le_bytes(b[j..j + 8].try_into().expect("8 bytes"));
            if w & 0x8080_8080_8080_8080 == 0 {
                j += 8;
                last = j - 1;
                continue;
            }
        }
        // U+4000..U+9FFF (most of CJK) is all COPY (a unit test checks it).
        if (0xE4..=0xE9).contains(&b[j]) {
            last = j;
            j += 3;
            continue;
        }
        let (class, len) = table.class_at(b, j);
        if class != COPY {
            break;
        }
        last = j;
        j += len;
    }
    (j, last)
}

/// Normalise a text for evidence matching: NFKC, drop white space (and the
/// invisible format characters listed in the module docs), lower-case.
///
/// ```
/// use ragmeter_core::evidence::normalize;
/// assert_eq!(normalize("⼤模型 Ｒetrieval\u{3000}Aug-\nmented"), "大模型retrievalaug-mented");
/// ```
pub fn normalize(text: &str) -> String {
    let mut n = Normalizer::new();
    n.run(text);
    String::from_utf8(std::mem::take(&mut n.out)).expect("normaliser emits UTF-8")
}

/// The second matching variant of a chunk text: [`normalize`] with
/// line-break hyphens dropped; `None` when the text has none.
pub fn normalize_dehyphenated(text: &str) -> Option<String> {
    let mut n = Normalizer::new();
    n.run(text);
    if !n.has_soft_hyphens() {
        return None;
    }
    let mut buf = Vec::new();
    n.dehyphenated_into(&mut buf);
    Some(String::from_utf8(buf).expect("normaliser emits UTF-8"))
}

// ---------------------------------------------------------------------------
// File names
// ---------------------------------------------------------------------------

/// Canonical form of a file name for comparison: NFC, trimmed, `\` to `/`,
/// leading `./` removed, trailing `/` removed, lower-cased.
pub fn normalize_file_name(name: &str) -> String {
    let s: String = name.trim().nfc().map(|c| if c == '\\' { '/' } else { c }).collect();
    let mut s = s.as_str();
    while let Some(rest) = s.strip_prefix("./") {
        s = rest;
    }
    s.trim_end_matches('/').to_lowercase()
}

/// Do two names (already through [`normalize_file_name`]) denote the same file?
/// Equal, or one is a suffix of the other starting right after a `/`.
pub fn file_matches(expected: &str, retrieved: &str) -> bool {
    if expected.is_empty() || retrieved.is_empty() {
        return false;
    }
    if expected == retrieved {
        return true;
    }
    let suffix = |long: &str, short: &str| long.len() > short.len() && long.ends_with(short) && long.as_bytes()[long.len() - short.len() - 1] == b'/';
    suffix(expected, retrieved) || suffix(retrieved, expected)
}
