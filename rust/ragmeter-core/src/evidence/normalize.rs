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
    /// the characters without one that follow it. Characters with a boundary
    /// are emitted as soon as they are read, from the table: ASCII sixteen
    /// bytes at a time where it can ([`Self::ascii_blocks`]), runs of CJK
    /// ideographs copied whole, other `COPY` characters copied, `MAPPED` ones
    /// from their stored NFKC. A character without a boundary (a combining
    /// mark, a trailing Hangul jamo, anything outside the BMP) undoes the
    /// output of the boundary character before it (see [`Mark`]) and sends
    /// that segment through NFKC.
    pub fn run(&mut self, text: &str) {
        self.out.clear();
        self.soft.clear();
        self.state = Some(Hyphen::None);
        self.prev_ws = true; // "no previous character": a leading hyphen is not a line-break hyphen
        self.out.reserve(text.len() + 16);
        let table = Table::get();
        let b = text.as_bytes();
        let n = b.len();
        // Where the segment of the last character with a boundary starts:
        // the text start until one is read.
        let mut mark = self.mark(0);
        let mut i = 0;
        while i < n {
            let lead = b[i];
            if lead < 0x80 {
                if self.state == Some(Hyphen::None) && i + 16 <= n {
                    let prev_ws = self.prev_ws;
                    let j = self.ascii_blocks(b, i);
                    if j > i {
                        // Before the last byte: no hyphen pending, `prev_ws` from the byte before it.
                        let last_kept = KEEP[b[j - 1] as usize] as usize;
                        let prev_ws = if j - 1 > i { !KEEP[b[j - 2] as usize] } else { prev_ws };
                        mark = Mark { input: j - 1, out: self.out.len() - last_kept, soft: self.soft.len(), state: Some(Hyphen::None), prev_ws };
                        i = j;
                        continue;
                    }
                }
                mark = self.mark(i);
                self.push_ascii(lead);
                i += 1;
                continue;
            }
            if (0xE4..=0xE9).contains(&lead) {
                // U+4000..U+9FFF (most of CJK) is all COPY (a unit test checks it).
                let mut j = i + 3;
                while j < n && (0xE4..=0xE9).contains(&b[j]) {
                    j += 3;
                }
                mark = self.mark(i);
                self.non_space();
                if j - i > 3 {
                    // Before the last ideograph: no white space or hyphen pending.
                    mark = Mark { input: j - 3, out: self.out.len() + (j - 3 - i), soft: self.soft.len(), state: Some(Hyphen::None), prev_ws: false };
                }
                append(&mut self.out, &b[i..j]);
                i = j;
                continue;
            }
            let (class, len) = table.class_at(b, i);
            match class {
                SLOW => {
                    let mut j = i + len;
                    while j < n {
                        let (c, l) = table.class_at(b, j);
                        if c != SLOW {
                            break;
                        }
                        j += l;
                    }
                    self.restore(&mark);
                    self.slow(&text[mark.input..j]);
                    i = j;
                }
                COPY => {
                    mark = self.mark(i);
                    self.non_space();
                    append(&mut self.out, &b[i..i + len]);
                    i += len;
                }
                _ => {
                    mark = self.mark(i);
                    let cp = if len == 2 { decode2(b, i) } else { decode3(b, i) };
                    self.mapped(table, cp);
                    i += len;
                }
            }
        }
    }

    /// Emit the NFKC of the `MAPPED` code point `cp`, alone.
    #[inline]
    fn mapped(&mut self, table: &Table, cp: u32) {
        let plain = table.plain[cp as usize];
        if plain != 0 {
            self.non_space();
            let start = (plain >> 8) as usize;
            append(&mut self.out, &table.bytes[start..start + (plain & 0xFF) as usize]);
        } else {
            for &c in table.mapped(cp) {
                self.push(c);
            }
        }
    }

    #[inline]
    fn mark(&self, input: usize) -> Mark {
        Mark { input, out: self.out.len(), soft: self.soft.len(), state: self.state, prev_ws: self.prev_ws }
    }

    #[inline]
    fn restore(&mut self, m: &Mark) {
        self.out.truncate(m.out);
        self.soft.truncate(m.soft);
        self.state = m.state;
        self.prev_ws = m.prev_ws;
    }

    /// ASCII bytes from `b[i..]` up to a `-` or a non-ASCII byte, sixteen at
    /// a time (call with no hyphen pending and 16 bytes left): lower-cased,
    /// white space dropped. With no hyphen pending and none read, white
    /// space changes nothing but `prev_ws`. Returns where it stopped.
    #[inline]
    fn ascii_blocks(&mut self, b: &[u8], i: usize) -> usize {
        self.out.reserve(b.len() - i);
        let len0 = self.out.len();
        // SAFETY: room for `b.len() - i` more bytes was reserved.
        let (end, written) = unsafe { ascii_run(b, i, self.out.as_mut_ptr().add(len0)) };
        // SAFETY: `ascii_run` wrote the first `written` of them.
        unsafe { self.out.set_len(len0 + written) };
        if end > i {
            self.prev_ws = !KEEP[b[end - 1] as usize];
        }
        end
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

/// Bytes kept by the ASCII blocks: anything but ASCII white space.
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

/// Where the segment of the last character with a composition boundary
/// before it starts, and the normaliser's state before that character: what
/// [`Normalizer::run`] restores when a character without a boundary follows.
#[derive(Clone, Copy)]
struct Mark {
    input: usize,
    out: usize,
    soft: usize,
    state: Option<Hyphen>,
    prev_ws: bool,
}

/// For each 8-bit keep mask, the positions of its set bits in order (the
/// shuffle that packs the kept bytes of eight to the front).
#[cfg(target_arch = "x86_64")]
static COMPACT: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let mut k = 0;
        let mut bit = 0;
        while bit < 8 {
            if m & (1 << bit) != 0 {
                t[m][k] = bit as u8;
                k += 1;
            }
            bit += 1;
        }
        m += 1;
    }
    t
};

/// Normalise ASCII without `-` from `b[i..]` into `dst`, in 16-byte blocks
/// (the SSSE3 version also takes the part of the last block before a `-` or
/// a non-ASCII byte): lower-cased, ASCII white space dropped. Returns where
/// it stopped and how many bytes it wrote.
///
/// # Safety
/// `dst` must have room for `b.len() - i` bytes (a block writes at most 16
/// bytes past the bytes kept before it, so never past what was read).
unsafe fn ascii_run(b: &[u8], i: usize, dst: *mut u8) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU has SSSE3; the caller's guarantee is passed on.
        return unsafe { ascii_run_ssse3(b, i, dst) };
    }
    // SAFETY: as above.
    unsafe { ascii_run_portable(b, i, dst) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn ascii_run_ssse3(b: &[u8], mut i: usize, dst: *mut u8) -> (usize, usize) {
    use std::arch::x86_64::*;
    let n = b.len();
    let mut w = 0;
    let space = _mm_set1_epi8(b' ' as i8);
    let below_tab = _mm_set1_epi8(0x08);
    let above_cr = _mm_set1_epi8(0x0E);
    let hyphen = _mm_set1_epi8(b'-' as i8);
    let below_a = _mm_set1_epi8(b'A' as i8 - 1);
    let above_z = _mm_set1_epi8(b'Z' as i8 + 1);
    let case_bit = _mm_set1_epi8(0x20);
    let eight = _mm_set1_epi8(8);
    while i + 16 <= n {
        // SAFETY: `i + 16 <= n`; writes stay within the caller's room (see `ascii_run`).
        let take = unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            let stop = (_mm_movemask_epi8(v) | _mm_movemask_epi8(_mm_cmpeq_epi8(v, hyphen))) as u32;
            // The bytes before the first non-ASCII byte or `-` (all sixteen when none).
            let take = if stop == 0 { 16 } else { stop.trailing_zeros() as usize };
            if take == 0 {
                return (i, w);
            }
            // Signed comparisons order the ASCII bytes taken correctly.
            let ws = _mm_or_si128(_mm_cmpeq_epi8(v, space), _mm_and_si128(_mm_cmpgt_epi8(v, below_tab), _mm_cmplt_epi8(v, above_cr)));
            let upper = _mm_and_si128(_mm_cmpgt_epi8(v, below_a), _mm_cmplt_epi8(v, above_z));
            let low = _mm_or_si128(v, _mm_and_si128(upper, case_bit));
            let keep = !(_mm_movemask_epi8(ws) as u32) & ((1u32 << take) - 1);
            if keep == 0xFFFF {
                _mm_storeu_si128(dst.add(w) as *mut __m128i, low);
                w += 16;
            } else if keep != 0 {
                let (k0, k1) = ((keep & 0xFF) as usize, (keep >> 8) as usize);
                let idx0 = _mm_loadl_epi64(COMPACT[k0].as_ptr() as *const __m128i);
                let idx1 = _mm_add_epi8(_mm_loadl_epi64(COMPACT[k1].as_ptr() as *const __m128i), eight);
                _mm_storel_epi64(dst.add(w) as *mut __m128i, _mm_shuffle_epi8(low, idx0));
                w += k0.count_ones() as usize;
                _mm_storel_epi64(dst.add(w) as *mut __m128i, _mm_shuffle_epi8(low, idx1));
                w += k1.count_ones() as usize;
            }
            take
        };
        i += take;
        if take < 16 {
            break;
        }
    }
    (i, w)
}

unsafe fn ascii_run_portable(b: &[u8], mut i: usize, dst: *mut u8) -> (usize, usize) {
    let n = b.len();
    let mut w = 0;
    while i + 16 <= n {
        let block = &b[i..i + 16];
        if block.iter().any(|&c| c >= 0x80 || c == b'-') {
            break;
        }
        for &c in block {
            // SAFETY: at most one byte written per byte read (see `ascii_run`).
            unsafe { *dst.add(w) = LOWER[c as usize] };
            w += KEEP[c as usize] as usize;
        }
        i += 16;
    }
    (i, w)
}

/// `out.extend_from_slice(src)` for the short pieces the normaliser copies
/// (a run of ideographs, one character): overlapping word copies instead of
/// a call to `memcpy`.
#[inline(always)]
fn append(out: &mut Vec<u8>, src: &[u8]) {
    let len = src.len();
    if len > 32 {
        out.extend_from_slice(src);
        return;
    }
    out.reserve(len);
    let at = out.len();
    // SAFETY: `len` bytes of room were reserved; every read is within `src`
    // (each pair of copies covers `0..len` from both ends, for the `len` range
    // it is used for), every write within `at..at + len`.
    unsafe {
        let d = out.as_mut_ptr().add(at);
        let s = src.as_ptr();
        if len >= 16 {
            (d as *mut u128).write_unaligned((s as *const u128).read_unaligned());
            (d.add(len - 16) as *mut u128).write_unaligned((s.add(len - 16) as *const u128).read_unaligned());
        } else if len >= 8 {
            (d as *mut u64).write_unaligned((s as *const u64).read_unaligned());
            (d.add(len - 8) as *mut u64).write_unaligned((s.add(len - 8) as *const u64).read_unaligned());
        } else if len >= 4 {
            (d as *mut u32).write_unaligned((s as *const u32).read_unaligned());
            (d.add(len - 4) as *mut u32).write_unaligned((s.add(len - 4) as *const u32).read_unaligned());
        } else {
            for k in 0..len {
                *d.add(k) = *s.add(k);
            }
        }
        out.set_len(at + len);
    }
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
    if name.is_ascii() {
        // NFC leaves ASCII as it is: no per-character normalisation (this runs once per chunk).
        let mut s = name.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\u{0B}').replace('\\', "/");
        let mut from = 0;
        while s[from..].starts_with("./") {
            from += 2;
        }
        let end = s[from..].trim_end_matches('/').len() + from;
        s.truncate(end);
        s.drain(..from);
        s.make_ascii_lowercase();
        return s;
    }
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
