//! Text normalisation for matching (see the module docs of `evidence`) and file-name canonical forms.

use unicode_normalization::UnicodeNormalization;


/// Characters that NFKC leaves unchanged in every context: NFKC-stable
/// starters (canonical combining class 0) that are never the second element of
/// a canonical composition. ASCII also qualifies but may be the *first* element
/// of one (`e` + U+0301), which the segmenting in [`Normalizer::run`] handles.
/// The property is checked exhaustively by a unit test.
#[cfg(test)]
pub(super) fn is_stable_nonascii(c: char) -> bool {
    is_stable_code(c as u32)
}

#[inline]
fn is_stable_code(cp: u32) -> bool {
    matches!(cp,
        0x4E00..=0x9FFF      // CJK Unified Ideographs
        | 0x3400..=0x4DBF    // CJK Unified Ideographs Extension A
        | 0xAC00..=0xD7A3    // Hangul syllables (composition with a trailing jamo is covered by the segmenting)
        | 0x3001..=0x3003    // 、。〃
        | 0x3008..=0x3011)   // 〈〉《》「」『』【】
}

#[cfg(test)]
pub(super) fn is_stable(c: char) -> bool {
    c.is_ascii() || is_stable_nonascii(c)
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
    /// Fast path: a maximal run of stable characters (ASCII and the CJK ranges
    /// of `is_stable_nonascii`) is final as it stands, except its last
    /// character when a non-stable character follows (it may compose with a
    /// combining mark); such runs are only lower-cased and stripped of white
    /// space, in bulk. Everything else goes through NFKC in segments that start
    /// and end at those safe boundaries.
    pub fn run(&mut self, text: &str) {
        self.out.clear();
        self.soft.clear();
        self.state = Some(Hyphen::None);
        self.prev_ws = true; // "no previous character": a leading hyphen is not a line-break hyphen
        self.out.reserve(text.len());
        let b = text.as_bytes();
        let n = b.len();
        let mut i = 0;
        let mut slow_start: Option<usize> = None;
        while i < n {
            let (run_end, last_start) = stable_run(b, i);
            if run_end == i {
                // Not a stable character: part of a slow segment.
                slow_start.get_or_insert(i);
                i += utf8_len(b[i]);
                continue;
            }
            // The run is maximal, so a non-stable character (or the end) follows it.
            let direct_end = if run_end == n { n } else { last_start };
            if direct_end > i {
                if let Some(s) = slow_start.take() {
                    self.slow(&text[s..i]);
                }
                self.direct(&b[i..direct_end]);
            }
            if direct_end < run_end {
                slow_start.get_or_insert(direct_end);
            }
            i = run_end;
        }
        if let Some(s) = slow_start {
            self.slow(&text[s..]);
        }
    }

    /// Bytes of stable characters only: lower-case ASCII, drop white space,
    /// track hyphens; stable non-ASCII bytes are copied (`to_ascii_lowercase`
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
        unsafe {
            let dst = self.out.as_mut_ptr().add(len0);
            for &c in rest {
                *dst.add(w) = LOWER[c as usize];
                w += KEEP[c as usize] as usize;
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

#[inline]
fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

/// The maximal run of stable characters starting at byte `i`: returns its end
/// and the start of its last character (both `i` when the run is empty).
#[inline]
fn stable_run(b: &[u8], i: usize) -> (usize, usize) {
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
        let c = b[j];
        if c < 0x80 {
            last = j;
            j += 1;
        } else if (0xE0..=0xEF).contains(&c) && j + 2 < n {
            let cp = ((c as u32 & 0x0F) << 12) | ((b[j + 1] as u32 & 0x3F) << 6) | (b[j + 2] as u32 & 0x3F);
            if !is_stable_code(cp) {
                break;
            }
            last = j;
            j += 3;
        } else {
            break;
        }
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
