//! Evidence-phrase matching for RAG chunks.
//!
//! A golden case names the files that hold its answer and short *evidence
//! phrases* that must appear in the answer chunk. Text extracted from PDFs and
//! OCR rarely matches a phrase byte for byte, so both sides are normalised
//! before matching (see [`normalize`]):
//!
//! 1. Unicode NFKC (Kangxi radical `⼤` U+2F24 becomes `大`, full-width `Ａ１`
//!    becomes `A1`, ligatures split, …);
//! 2. every Unicode `White_Space` character is removed (spaces, tabs, line
//!    breaks, U+3000 ideographic space, NBSP, …), and so are the invisible
//!    format characters PDF extractors leave behind: soft hyphen U+00AD,
//!    zero-width space/non-joiner/joiner U+200B..U+200D, word joiner U+2060
//!    and the byte-order mark U+FEFF;
//! 3. lower-casing, character by character (`char::to_lowercase`), with the
//!    Greek final sigma `ς` folded to `σ` so that a phrase matches wherever the
//!    word ends.
//!
//! **Line-break hyphenation.** A chunk's text is matched in two variants: the
//! normalised text above, and — only when it contains one — the same text with
//! every *line-break hyphen* dropped. A line-break hyphen is a `-` (U+002D, or
//! U+2010 HYPHEN; full-width and other compatibility hyphens become U+002D
//! through NFKC) that directly follows a non-space character and is followed
//! by optional spaces, a line break (`\n`, `\r`, VT, FF, U+0085, U+2028,
//! U+2029), optional further white space and then a non-space character. So
//! `retrie-\nval` matches the phrase `retrieval`, while `state-of-the-\nart`
//! still matches `state-of-the-art` (the first variant). Phrases themselves are
//! normalised without this step. A phrase is found in a chunk when it occurs in
//! either variant.
//!
//! **Files.** File names are compared after [`normalize_file_name`] (NFC,
//! trimmed, `\` to `/`, leading `./` dropped, lower-cased) by
//! [`file_matches`]: equal, or one is a suffix of the other on a `/` boundary,
//! so the bare name `Guide.pdf` matches `docs/guide.pdf`, `a/guide.pdf` matches
//! `/kb/a/guide.pdf`, but `a/guide.pdf` does not match `b/guide.pdf`.
//!
//! **Relevance** ([`match_evidence`]): a retrieved chunk is relevant when its
//! file is one of the case's expected files (any file when none are given)
//! and its normalised text contains at least one normalised evidence phrase
//! (any chunk of an expected file when no phrase is given). Phrases that
//! normalise to the empty string are ignored (flagged in
//! [`EvidenceResult::phrase_empty`], never found); a case left with neither
//! files nor non-empty phrases is *unlabelled* and none of its chunks is
//! relevant (the scorer reports nulls for it).
//!
//! Matching uses one Aho-Corasick automaton per case over its unique
//! normalised phrases (see [`PhraseMatcher::scan`]: every phrase present in a
//! chunk is seen, overlapping or not), and runs in parallel over cases with
//! rayon.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};
use rayon::prelude::*;
use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, Result};

// ---------------------------------------------------------------------------
// Normalisation
// ---------------------------------------------------------------------------

/// Characters that NFKC leaves unchanged in every context: NFKC-stable
/// starters (canonical combining class 0) that are never the second element of
/// a canonical composition. ASCII also qualifies but may be the *first* element
/// of one (`e` + U+0301), which the segmenting in [`Normalizer::run`] handles.
/// The property is checked exhaustively by a unit test.
#[cfg(test)]
fn is_stable_nonascii(c: char) -> bool {
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
fn is_stable(c: char) -> bool {
    c.is_ascii() || is_stable_nonascii(c)
}

/// Line-break characters (a subset of `White_Space`).
#[inline]
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Invisible format characters removed like white space.
#[inline]
fn is_invisible(c: char) -> bool {
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
// Phrase matching
// ---------------------------------------------------------------------------

fn packed_searcher(patterns: &[String]) -> Option<aho_corasick::packed::Searcher> {
    // None when the CPU lacks the SIMD the packed searcher needs: the caller builds an automaton.
    aho_corasick::packed::Config::new()
        .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
        .builder()
        .extend(patterns.iter().map(|p| p.as_bytes()))
        .build()
}

/// Mark every pattern that occurs anywhere in `haystack`, overlapping or not, with a
/// leftmost-first searcher `find(at) -> (start, pattern)`: after a match at `s`, the
/// other unfound patterns are compared at `s` directly and the search resumes at `s + 1`.
/// Stops as soon as all are found; returns how many were newly found.
fn leftmost_all(
    mut find: impl FnMut(usize) -> Option<(usize, usize)>,
    patterns: &[String],
    haystack: &[u8],
    found: &mut [bool],
) -> usize {
    let total = found.len();
    let mut missing = found.iter().filter(|&&f| !f).count();
    let mut new = 0;
    let mut at = 0;
    while missing > 0 && at < haystack.len() {
        let Some((s, p)) = find(at) else { break };
        if !found[p] {
            found[p] = true;
            new += 1;
            missing -= 1;
        }
        if missing > 0 && total > 1 {
            for (q, pat) in patterns.iter().enumerate() {
                if !found[q] && haystack[s..].starts_with(pat.as_bytes()) {
                    found[q] = true;
                    new += 1;
                    missing -= 1;
                }
            }
        }
        at = s + 1;
    }
    new
}

/// Up to this many patterns, [`PhraseMatcher::scan`] uses a leftmost-first search.
pub const FEW_PATTERNS: usize = 16;

/// Up to this many unique patterns, a case is searched with aho-corasick's
/// packed (Teddy, SIMD) multi-pattern searcher instead of an automaton: far
/// cheaper to build (one per case) and as fast to run on a few hundred bytes.
pub const PACKED_PATTERNS: usize = 4;

enum Searcher {
    None,
    Packed(aho_corasick::packed::Searcher),
    Ac(AhoCorasick),
}

/// A matcher over the unique, non-empty normalised phrases of one case:
/// `memmem` finders for a few patterns, an Aho-Corasick automaton otherwise.
pub struct PhraseMatcher {
    searcher: Searcher,
    patterns: Vec<String>,
    /// For each automaton pattern, the indices of the input phrases it stands for.
    owners: Vec<Vec<u32>>,
    n_phrases: usize,
    empty: Vec<bool>,
}

impl PhraseMatcher {
    pub fn new<'p>(phrases: impl IntoIterator<Item = &'p str>) -> Result<Self> {
        let norms: Vec<String> = phrases.into_iter().map(normalize).collect();
        Self::from_normalized(norms.iter().map(String::as_str))
    }

    /// Like [`PhraseMatcher::new`] for phrases already through [`normalize`].
    pub fn from_normalized<'p>(phrases: impl IntoIterator<Item = &'p str>) -> Result<Self> {
        let mut patterns: Vec<String> = Vec::new();
        let mut owners: Vec<Vec<u32>> = Vec::new();
        let mut empty = Vec::new();
        for (i, norm) in phrases.into_iter().enumerate() {
            empty.push(norm.is_empty());
            if norm.is_empty() {
                continue;
            }
            match patterns.iter().position(|q| q == norm) {
                Some(j) => owners[j].push(i as u32),
                None => {
                    patterns.push(norm.to_string());
                    owners.push(vec![i as u32]);
                }
            }
        }
        let searcher = if patterns.is_empty() {
            Searcher::None
        } else if let Some(packed) = (patterns.len() <= PACKED_PATTERNS).then(|| packed_searcher(&patterns)).flatten() {
            Searcher::Packed(packed)
        } else {
            Searcher::Ac(
                AhoCorasick::builder()
                    .match_kind(if patterns.len() > FEW_PATTERNS { MatchKind::Standard } else { MatchKind::LeftmostFirst })
                    .kind(Some(AhoCorasickKind::NoncontiguousNFA))
                    .build(&patterns)
                    .map_err(|e| Error::input(format!("cannot build the evidence matcher: {e}")))?,
            )
        };
        Ok(PhraseMatcher { searcher, patterns, owners, n_phrases: empty.len(), empty })
    }

    /// Number of input phrases (including empty ones).
    pub fn len(&self) -> usize {
        self.n_phrases
    }

    pub fn is_empty(&self) -> bool {
        self.n_phrases == 0
    }

    /// True when at least one phrase is non-empty after normalisation.
    pub fn has_phrases(&self) -> bool {
        !self.patterns.is_empty()
    }

    /// Per input phrase: did it normalise to the empty string?
    pub fn empty_flags(&self) -> &[bool] {
        &self.empty
    }

    /// Mark in `found` (one flag per unique pattern) the patterns occurring in
    /// `haystack`; returns how many were newly marked.
    ///
    /// With at most [`PACKED_PATTERNS`] patterns the packed (Teddy) searcher
    /// is used leftmost-first. With at most [`FEW_PATTERNS`] the automaton
    /// is leftmost-first, whose SIMD prefilter is far faster on CJK text than
    /// an overlapping search: after a match starting at `s`, the other unfound
    /// patterns are compared at `s` directly and the search resumes at `s + 1`,
    /// so every pattern that occurs anywhere is found, overlapping or not.
    /// Larger sets use a standard overlapping search. Either way it stops as
    /// soon as all patterns are found.
    pub fn scan(&self, haystack: &[u8], found: &mut [bool]) -> usize {
        let ac = match &self.searcher {
            Searcher::None => return 0,
            Searcher::Packed(packed) => {
                let find = |at: usize| {
                    let span = aho_corasick::Span::from(at..haystack.len());
                    packed.find_in(haystack, span).map(|m| (m.start(), m.pattern().as_usize()))
                };
                return leftmost_all(find, &self.patterns, haystack, found);
            }
            Searcher::Ac(ac) => ac,
        };
        if self.patterns.len() > FEW_PATTERNS {
            let mut missing = found.iter().filter(|&&f| !f).count();
            let mut new = 0;
            for m in ac.find_overlapping_iter(haystack) {
                let p = m.pattern().as_usize();
                if !found[p] {
                    found[p] = true;
                    new += 1;
                    missing -= 1;
                    if missing == 0 {
                        break;
                    }
                }
            }
            return new;
        }
        leftmost_all(
            |at| ac.find(Input::new(haystack).span(at..haystack.len())).map(|m| (m.start(), m.pattern().as_usize())),
            &self.patterns,
            haystack,
            found,
        )
    }

    pub fn patterns_len(&self) -> usize {
        self.owners.len()
    }

    /// The input phrase indices a pattern stands for.
    pub fn owners(&self, pattern: usize) -> &[u32] {
        &self.owners[pattern]
    }

    /// Which input phrases occur in `text` (normalised here, both variants).
    pub fn found_in(&self, text: &str) -> Vec<bool> {
        let mut n = Normalizer::new();
        n.run(text);
        let mut pat = vec![false; self.patterns_len()];
        self.scan(&n.out, &mut pat);
        if n.has_soft_hyphens() {
            let mut buf = Vec::new();
            n.dehyphenated_into(&mut buf);
            self.scan(&buf, &mut pat);
        }
        let mut out = vec![false; self.n_phrases];
        for (p, &f) in pat.iter().enumerate() {
            if f {
                for &o in &self.owners[p] {
                    out[o as usize] = true;
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// Run-wide phrase index
// ---------------------------------------------------------------------------

/// Which of a set of normalised phrases occur in *any* of many normalised
/// texts (e.g. every retrieved chunk of a run), fed one text at a time from
/// any number of threads through [`RunIndex::scan`].
///
/// An Aho-Corasick automaton over hundreds of thousands of unrelated phrases
/// is slow to run (a few MB/s: the trie near the root is dense and every byte
/// walks failure links through a large, cache-missing automaton), so phrases
/// of 8 bytes or more are indexed by 8-byte *windows* (4 bytes for phrases of
/// 4 to 7 bytes): text positions are hashed and tested against a blocked
/// Bloom filter (two bits in one 64-bit word), and only filter hits look up
/// the windows' phrases and compare them in full. Long phrases let the scan
/// probe only every 4th (16..23 bytes) or 8th (>= 24 bytes) position: such a
/// phrase indexes 4 or 8 consecutive windows, one of which starts at a probed
/// position wherever the phrase occurs. The windows of a phrase are chosen
/// among its offsets as those shared with the fewest other phrases. Phrases shorter than 4 bytes (rare) go through
/// an Aho-Corasick automaton. Phrases already found are skipped, and a text
/// is not scanned at all once every phrase has been found.
pub struct RunIndex {
    data: Vec<u8>,
    starts: Vec<usize>,
    found: Vec<AtomicBool>,
    remaining: AtomicUsize,
    /// 8-byte windows probed at every 8th, every 4th and every text position
    /// (phrases of >= 24, 16..23 and 8..15 bytes), 4-byte windows at every
    /// position (4..7 bytes).
    w8s8: Window,
    w8s4: Window,
    w8: Window,
    w4: Window,
    short: Option<(AhoCorasick, Vec<u32>)>,
    /// Pattern `id`'s window keys are `keys[key_starts[id]..key_starts[id + 1]]`.
    keys: Vec<u64>,
    key_starts: Vec<usize>,
    /// Per input phrase: its pattern id, `u32::MAX` when it normalised to "".
    phrase_ids: Vec<u32>,
}

struct Window {
    width: usize,
    /// Text positions probed: multiples of `stride`. Each phrase then indexes
    /// `stride` consecutive windows, so that one of them starts at a probed
    /// position wherever the phrase occurs.
    stride: usize,
    bits: Vec<u64>,
    shift: u32,
    cands: HashMap<u64, Cands, BuildHasherDefault<KeyHasher>>,
}

/// The phrases (id, offset of the window in the phrase) behind one window key,
/// and how many of those entries are not found yet: once none is left, a
/// key that is frequent in the texts costs a lookup, not a walk of its list.
#[derive(Default)]
struct Cands {
    live: AtomicU32,
    list: Vec<(u32, u32)>,
}

/// Hasher for the window keys (8 bytes of text): one multiply, high bits folded down.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (x ^ 0x2545_F491_4F6C_DD1D).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 31)
    }
}

const WINDOW_SEED: u64 = 0x51_7C_C1_B7_27_22_0A_95;

impl Window {
    fn new(width: usize, stride: usize) -> Self {
        Window { width, stride, bits: Vec::new(), shift: 64, cands: HashMap::default() }
    }

    #[inline]
    fn key(&self, b: &[u8], i: usize) -> u64 {
        if self.width == 8 {
            u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
        } else {
            u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes")) as u64
        }
    }

    #[inline]
    fn hash(key: u64) -> u64 {
        (key ^ WINDOW_SEED).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// Index `stride` consecutive windows of `pat`, the run of them shared
    /// with the fewest phrases so far (needs `pat.len() >= width + stride - 1`).
    fn add(&mut self, pat: &[u8], id: u32, keys: &mut Vec<u64>) {
        let last = pat.len() - self.width + 1 - self.stride;
        let step = (last / 15).max(1);
        let mut best = (usize::MAX, 0usize);
        let mut first = 0;
        loop {
            let used: usize = (first..first + self.stride).map(|o| self.cands.get(&self.key(pat, o)).map_or(0, |c| c.list.len())).sum();
            if used < best.0 {
                best = (used, first);
                if used == 0 {
                    break;
                }
            }
            if first == last {
                break;
            }
            first = (first + step).min(last);
        }
        for off in best.1..best.1 + self.stride {
            let k = self.key(pat, off);
            self.cands.entry(k).or_default().list.push((id, off as u32));
            keys.push(k);
        }
    }

    /// Size the Bloom filter (about 32 bits per window, at most 2^24 bits) and fill it.
    fn finish(&mut self) {
        if self.cands.is_empty() {
            return;
        }
        let words = (self.cands.len() / 2).next_power_of_two().clamp(1024, 1 << 18);
        self.shift = 64 - words.trailing_zeros();
        self.bits = vec![0u64; words];
        for c in self.cands.values_mut() {
            *c.live.get_mut() = c.list.len() as u32;
        }
        let keys: Vec<u64> = self.cands.keys().copied().collect();
        for k in keys {
            let (w, m) = self.slot(k);
            self.bits[w] |= m;
        }
    }

    #[inline]
    fn slot(&self, key: u64) -> (usize, u64) {
        let h = Self::hash(key);
        ((h >> self.shift) as usize, (1u64 << ((h >> 26) & 63)) | (1u64 << ((h >> 32) & 63)))
    }
}

/// Hint the CPU to fetch `bits[i]` into the cache.
#[inline(always)]
fn prefetch(bits: &[u64], i: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; the address is in bounds (`i < bits.len()`).
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(bits.as_ptr().add(i) as *const i8, _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bits, i);
}

impl RunIndex {
    /// Index `phrases`, each already through [`normalize`].
    pub fn from_normalized<S: AsRef<str>>(phrases: &[S]) -> Result<Self> {
        let mut ids: HashMap<&[u8], u32> = HashMap::with_capacity(phrases.len());
        let mut data = Vec::new();
        let mut starts = vec![0usize];
        let mut phrase_ids = Vec::with_capacity(phrases.len());
        for p in phrases {
            let p = p.as_ref().as_bytes();
            if p.is_empty() {
                phrase_ids.push(u32::MAX);
                continue;
            }
            let next = ids.len() as u32;
            let id = *ids.entry(p).or_insert(next);
            if id == next {
                data.extend_from_slice(p);
                starts.push(data.len());
            }
            phrase_ids.push(id);
        }
        let n = starts.len() - 1;
        let mut w8s8 = Window::new(8, 8);
        let mut w8s4 = Window::new(8, 4);
        let mut w8 = Window::new(8, 1);
        let mut w4 = Window::new(4, 1);
        let mut short_pats: Vec<&[u8]> = Vec::new();
        let mut short_ids = Vec::new();
        let mut keys = Vec::new();
        let mut key_starts = Vec::with_capacity(n + 1);
        key_starts.push(0);
        for id in 0..n {
            let pat = &data[starts[id]..starts[id + 1]];
            if pat.len() >= 24 {
                w8s8.add(pat, id as u32, &mut keys);
            } else if pat.len() >= 16 {
                w8s4.add(pat, id as u32, &mut keys);
            } else if pat.len() >= 8 {
                w8.add(pat, id as u32, &mut keys);
            } else if pat.len() >= 4 {
                w4.add(pat, id as u32, &mut keys);
            } else {
                short_pats.push(pat);
                short_ids.push(id as u32);
            }
            key_starts.push(keys.len());
        }
        w8s8.finish();
        w8s4.finish();
        w8.finish();
        w4.finish();
        let short = if short_pats.is_empty() {
            None
        } else {
            let ac = AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(&short_pats)
                .map_err(|e| Error::input(format!("cannot build the evidence matcher: {e}")))?;
            Some((ac, short_ids))
        };
        Ok(RunIndex {
            found: (0..n).map(|_| AtomicBool::new(false)).collect(),
            remaining: AtomicUsize::new(n),
            data,
            starts,
            w8s8,
            w8s4,
            w8,
            w4,
            short,
            keys,
            key_starts,
            phrase_ids,
        })
    }

    fn pattern(&self, id: u32) -> &[u8] {
        &self.data[self.starts[id as usize]..self.starts[id as usize + 1]]
    }

    #[inline]
    fn mark(&self, id: u32) {
        if !self.found[id as usize].swap(true, Ordering::Relaxed) {
            self.remaining.fetch_sub(1, Ordering::Relaxed);
            let len = self.pattern(id).len();
            let w = match len {
                24.. => &self.w8s8,
                16..=23 => &self.w8s4,
                8..=15 => &self.w8,
                4..=7 => &self.w4,
                _ => return,
            };
            for k in &self.keys[self.key_starts[id as usize]..self.key_starts[id as usize + 1]] {
                if let Some(c) = w.cands.get(k) {
                    c.live.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Every phrase has been found: further texts cannot change the answer.
    pub fn all_found(&self) -> bool {
        self.remaining.load(Ordering::Relaxed) == 0
    }

    /// Record the phrases occurring in `text` (a normalised text).
    pub fn scan(&self, text: &[u8]) {
        if self.remaining.load(Ordering::Relaxed) == 0 {
            return;
        }
        for w in [&self.w8s8, &self.w8s4, &self.w8] {
            if !w.bits.is_empty() {
                self.scan_windows::<8>(w, text);
            }
        }
        if !self.w4.bits.is_empty() {
            self.scan_windows::<4>(&self.w4, text);
        }
        if let Some((ac, ids)) = &self.short {
            for m in ac.find_overlapping_iter(text) {
                self.mark(ids[m.pattern().as_usize()]);
            }
        }
    }

    /// Test the window at every probed position of `text` against the Bloom
    /// filter; look up and compare the phrases behind a hit. Positions go in
    /// blocks: hash all and prefetch their filter words, then test them, so
    /// that the cache misses of a large filter overlap instead of queueing.
    #[inline(always)]
    fn scan_windows<const W: usize>(&self, w: &Window, text: &[u8]) {
        const BLOCK: usize = 32;
        if text.len() < W {
            return;
        }
        let bits = w.bits.as_slice();
        let shift = w.shift;
        let stride = w.stride;
        let p = text.as_ptr();
        let key = |i: usize| -> u64 {
            // SAFETY: callers pass i <= text.len() - W.
            unsafe {
                if W == 8 {
                    u64::from_le((p.add(i) as *const u64).read_unaligned())
                } else {
                    u32::from_le((p.add(i) as *const u32).read_unaligned()) as u64
                }
            }
        };
        let last = text.len() - W;
        let mut hashes = [0u64; BLOCK];
        let mut i = 0;
        while i <= last {
            let count = ((last - i) / stride + 1).min(BLOCK);
            for (j, h) in hashes.iter_mut().enumerate().take(count) {
                *h = Window::hash(key(i + j * stride));
                prefetch(bits, (*h >> shift) as usize);
            }
            for (j, &h) in hashes.iter().enumerate().take(count) {
                // SAFETY: `h >> shift < bits.len()` (`bits.len() == 1 << (64 - shift)`).
                let word = unsafe { *bits.get_unchecked((h >> shift) as usize) };
                let m = (1u64 << ((h >> 26) & 63)) | (1u64 << ((h >> 32) & 63));
                if word & m == m {
                    let at = i + j * stride;
                    self.verify(w, key(at), at, text);
                }
            }
            i += count * stride;
        }
    }

    #[cold]
    #[inline(never)]
    fn verify(&self, w: &Window, k: u64, i: usize, text: &[u8]) {
        let Some(cands) = w.cands.get(&k) else { return };
        if cands.live.load(Ordering::Relaxed) == 0 {
            return;
        }
        for &(id, off) in &cands.list {
            let off = off as usize;
            if i < off || self.found[id as usize].load(Ordering::Relaxed) {
                continue;
            }
            if text[i - off..].starts_with(self.pattern(id)) {
                self.mark(id);
            }
        }
    }

    /// Per input phrase: found in at least one scanned text (false for phrases
    /// that normalised to the empty string).
    pub fn phrases_found(&self) -> Vec<bool> {
        self.phrase_ids.iter().map(|&id| id != u32::MAX && self.found[id as usize].load(Ordering::Relaxed)).collect()
    }
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

// ---------------------------------------------------------------------------
// Batch
// ---------------------------------------------------------------------------

/// Random access to a column of strings.
pub trait Strings: Sync {
    fn len(&self) -> usize;
    fn get(&self, i: usize) -> &str;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: AsRef<str> + Sync> Strings for [T] {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    fn get(&self, i: usize) -> &str {
        self[i].as_ref()
    }
}

impl<T: AsRef<str> + Sync> Strings for Vec<T> {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    fn get(&self, i: usize) -> &str {
        self[i].as_ref()
    }
}

/// Column inputs for [`match_evidence`]. All offsets have `n_cases + 1`
/// entries, start at 0, never decrease and end at the length of their column.
pub struct EvidenceBatch<'a, S: Strings + ?Sized> {
    /// Case `c`'s expected files are `expected_files[file_offsets[c]..file_offsets[c + 1]]`.
    pub file_offsets: &'a [usize],
    pub expected_files: &'a S,
    /// Case `c`'s evidence phrases are `phrases[phrase_offsets[c]..phrase_offsets[c + 1]]`.
    pub phrase_offsets: &'a [usize],
    pub phrases: &'a S,
    /// Case `c`'s retrieved chunks, in rank order, are `chunk_offsets[c]..chunk_offsets[c + 1]`.
    pub chunk_offsets: &'a [usize],
    pub chunk_files: &'a S,
    pub chunk_texts: &'a S,
}

/// Output of [`match_evidence`]. Ranks are 1-based positions within the case's
/// retrieved list; 0 means "never". To restrict to the top k, compare a rank
/// with k (`0 < rank <= k`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvidenceResult {
    /// Per case: has expected files or at least one non-empty phrase.
    pub labeled: Vec<bool>,
    /// Per chunk: its file is one of the case's expected files (always true when none are given).
    pub file_match: Vec<bool>,
    /// Per chunk: number of the case's (non-empty) phrases its text contains, whatever its file.
    pub phrases_found: Vec<u32>,
    /// Per chunk: relevant by the rule in the module docs (false in unlabelled cases).
    pub relevant: Vec<bool>,
    /// Per phrase: rank of the first chunk *of an expected file* containing it.
    pub phrase_first_rank: Vec<u32>,
    /// Per phrase: rank of the first chunk of *any* file containing it.
    pub phrase_any_rank: Vec<u32>,
    /// Per phrase: normalises to the empty string (ignored).
    pub phrase_empty: Vec<bool>,
    /// Per expected file: rank of the first chunk from that file.
    pub file_first_rank: Vec<u32>,
    /// Per phrase: occurs in at least one retrieved chunk of *any* case of the
    /// batch (false for empty phrases). Filled by [`match_evidence_with`] with
    /// `run_wide`, empty otherwise.
    pub phrase_in_run: Vec<bool>,
}

struct CaseOut {
    labeled: bool,
    file_match: Vec<bool>,
    phrases_found: Vec<u32>,
    relevant: Vec<bool>,
    phrase_first_rank: Vec<u32>,
    phrase_any_rank: Vec<u32>,
    phrase_empty: Vec<bool>,
    file_first_rank: Vec<u32>,
}

fn check_offsets(offsets: &[usize], n_cases: usize, total: usize, name: &str) -> Result<()> {
    if offsets.len() != n_cases + 1 {
        return Err(Error::input(format!("{name}: expected {} offsets (cases + 1), got {}", n_cases + 1, offsets.len())));
    }
    if offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) || offsets[n_cases] != total {
        return Err(Error::input(format!("{name}: offsets must start at 0, never decrease and end at {total}")));
    }
    Ok(())
}

struct Scratch {
    norm: Normalizer,
    dehy: Vec<u8>,
    pat: Vec<bool>,
}

fn match_case<S: Strings + ?Sized>(
    b: &EvidenceBatch<'_, S>,
    norm_phrases: &[String],
    c: usize,
    scratch: &mut Scratch,
) -> Result<CaseOut> {
    let files: Vec<String> = (b.file_offsets[c]..b.file_offsets[c + 1])
        .map(|i| normalize_file_name(b.expected_files.get(i)))
        .collect();
    let matcher = PhraseMatcher::from_normalized(norm_phrases[b.phrase_offsets[c]..b.phrase_offsets[c + 1]].iter().map(String::as_str))?;
    let chunks = b.chunk_offsets[c]..b.chunk_offsets[c + 1];
    let n_chunks = chunks.len();
    let has_files = !files.is_empty();
    let has_phrases = matcher.has_phrases();
    let labeled = has_files || has_phrases;

    let mut out = CaseOut {
        labeled,
        file_match: Vec::with_capacity(n_chunks),
        phrases_found: Vec::with_capacity(n_chunks),
        relevant: Vec::with_capacity(n_chunks),
        phrase_first_rank: vec![0; matcher.len()],
        phrase_any_rank: vec![0; matcher.len()],
        phrase_empty: matcher.empty_flags().to_vec(),
        file_first_rank: vec![0; files.len()],
    };
    // First rank per unique pattern (any file / expected file).
    let n_pat = matcher.patterns_len();
    let mut pat_any = vec![0u32; n_pat];
    let mut pat_first = vec![0u32; n_pat];

    for (r, k) in chunks.enumerate() {
        let rank = (r + 1) as u32;
        let fm = if has_files {
            let name = normalize_file_name(b.chunk_files.get(k));
            let mut any = false;
            for (j, f) in files.iter().enumerate() {
                if file_matches(f, &name) {
                    any = true;
                    if out.file_first_rank[j] == 0 {
                        out.file_first_rank[j] = rank;
                    }
                }
            }
            any
        } else {
            true
        };
        let mut n_found = 0u32;
        if has_phrases {
            scratch.pat.clear();
            scratch.pat.resize(n_pat, false);
            scratch.norm.run(b.chunk_texts.get(k));
            matcher.scan(&scratch.norm.out, &mut scratch.pat);
            if scratch.norm.has_soft_hyphens() {
                scratch.norm.dehyphenated_into(&mut scratch.dehy);
                matcher.scan(&scratch.dehy, &mut scratch.pat);
            }
            for (p, &f) in scratch.pat.iter().enumerate() {
                if f {
                    n_found += matcher.owners(p).len() as u32;
                    if pat_any[p] == 0 {
                        pat_any[p] = rank;
                    }
                    if fm && pat_first[p] == 0 {
                        pat_first[p] = rank;
                    }
                }
            }
        }
        out.file_match.push(fm);
        out.phrases_found.push(n_found);
        out.relevant.push(labeled && fm && (!has_phrases || n_found > 0));
    }
    for p in 0..n_pat {
        for &o in matcher.owners(p) {
            out.phrase_any_rank[o as usize] = pat_any[p];
            out.phrase_first_rank[o as usize] = pat_first[p];
        }
    }
    Ok(out)
}

/// Decide relevance for every retrieved chunk of every case, in parallel over
/// cases. See the module docs for the rules and [`EvidenceResult`] for the
/// outputs.
pub fn match_evidence<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>) -> Result<EvidenceResult> {
    match_evidence_with(b, false)
}

/// [`match_evidence`], and with `run_wide` also
/// [`EvidenceResult::phrase_in_run`]: which phrases occur in any retrieved
/// chunk of the whole batch (evidence no chunk of the run contains is often an
/// annotation slip). Phrases found in their own case's chunks are in the run;
/// only the others are searched for in all chunk texts, in a second pass that
/// stops as soon as each of them is found.
pub fn match_evidence_with<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>, run_wide: bool) -> Result<EvidenceResult> {
    let n_cases = b.chunk_offsets.len().saturating_sub(1);
    if b.chunk_offsets.is_empty() {
        return Err(Error::input("chunk offsets: expected cases + 1 entries, got 0"));
    }
    check_offsets(b.file_offsets, n_cases, b.expected_files.len(), "expected-file offsets")?;
    check_offsets(b.phrase_offsets, n_cases, b.phrases.len(), "phrase offsets")?;
    check_offsets(b.chunk_offsets, n_cases, b.chunk_texts.len(), "chunk offsets")?;
    if b.chunk_files.len() != b.chunk_texts.len() {
        return Err(Error::input(format!(
            "chunk files and chunk texts differ in length ({} vs {})",
            b.chunk_files.len(),
            b.chunk_texts.len()
        )));
    }

    let norm_phrases: Vec<String> = (0..b.phrases.len()).into_par_iter().with_min_len(1024).map(|i| normalize(b.phrases.get(i))).collect();
    let per_case: Vec<CaseOut> = (0..n_cases)
        .into_par_iter()
        .with_min_len(16)
        .map_init(
            || Scratch { norm: Normalizer::new(), dehy: Vec::new(), pat: Vec::new() },
            |scratch, c| match_case(b, &norm_phrases, c, scratch),
        )
        .collect::<Result<Vec<_>>>()?;

    let n_chunks = b.chunk_texts.len();
    let mut res = EvidenceResult {
        labeled: Vec::with_capacity(n_cases),
        file_match: Vec::with_capacity(n_chunks),
        phrases_found: Vec::with_capacity(n_chunks),
        relevant: Vec::with_capacity(n_chunks),
        phrase_first_rank: Vec::with_capacity(b.phrases.len()),
        phrase_any_rank: Vec::with_capacity(b.phrases.len()),
        phrase_empty: Vec::with_capacity(b.phrases.len()),
        file_first_rank: Vec::with_capacity(b.expected_files.len()),
        phrase_in_run: Vec::new(),
    };
    for o in per_case {
        res.labeled.push(o.labeled);
        res.file_match.extend(o.file_match);
        res.phrases_found.extend(o.phrases_found);
        res.relevant.extend(o.relevant);
        res.phrase_first_rank.extend(o.phrase_first_rank);
        res.phrase_any_rank.extend(o.phrase_any_rank);
        res.phrase_empty.extend(o.phrase_empty);
        res.file_first_rank.extend(o.file_first_rank);
    }
    if run_wide {
        res.phrase_in_run = phrases_in_run(&norm_phrases, &res.phrase_any_rank, b.chunk_texts)?;
    }
    Ok(res)
}

/// Per phrase, does some chunk of the batch contain it? A phrase found in its own
/// case's chunks (`any_rank > 0`) does, and so does every phrase normalising to
/// the same text. Only the rest, usually a few annotation slips, are searched for
/// in all `texts`: a small index, and a pass that ends once all are found. (One
/// index over all phrases, probed while matching, cost 15x the matching itself
/// when the phrases share the texts' vocabulary.)
fn phrases_in_run<S: Strings + ?Sized>(norm_phrases: &[String], any_rank: &[u32], texts: &S) -> Result<Vec<bool>> {
    let seen: HashSet<&str> = norm_phrases.iter().zip(any_rank).filter(|(_, &r)| r > 0).map(|(p, _)| p.as_str()).collect();
    let mut pending: Vec<&str> =
        norm_phrases.iter().map(String::as_str).filter(|p| !p.is_empty() && !seen.contains(p)).collect();
    pending.sort_unstable();
    pending.dedup();
    let mut found_later: HashSet<&str> = HashSet::new();
    if !pending.is_empty() {
        let index = RunIndex::from_normalized(&pending)?;
        scan_texts(&index, texts);
        found_later.extend(pending.iter().zip(index.phrases_found()).filter(|(_, f)| *f).map(|(p, _)| *p));
    }
    Ok(norm_phrases.iter().map(|p| !p.is_empty() && (seen.contains(p.as_str()) || found_later.contains(p.as_str()))).collect())
}

/// Probe `index` with every text, normalised (and once more without soft hyphens
/// when it has some), in parallel; texts left once every phrase is found are skipped.
fn scan_texts<T: Strings + ?Sized>(index: &RunIndex, texts: &T) {
    (0..texts.len()).into_par_iter().with_min_len(64).for_each_init(
        || (Normalizer::new(), Vec::new()),
        |(norm, dehy), i| {
            if index.all_found() {
                return;
            }
            norm.run(texts.get(i));
            index.scan(&norm.out);
            if norm.has_soft_hyphens() {
                norm.dehyphenated_into(dehy);
                index.scan(dehy);
            }
        },
    );
}

/// For each phrase, does it occur (after normalisation) in at least one of
/// `texts`? One [`RunIndex`] over all unique phrases, parallel over texts.
/// Used to flag evidence phrases that no retrieved chunk of a whole run
/// contains ([`match_evidence_with`] answers the same during matching).
pub fn phrases_in_texts<S: Strings + ?Sized, T: Strings + ?Sized>(phrases: &S, texts: &T) -> Result<Vec<bool>> {
    let norms: Vec<String> = (0..phrases.len()).map(|i| normalize(phrases.get(i))).collect();
    let index = RunIndex::from_normalized(&norms)?;
    scan_texts(&index, texts);
    Ok(index.phrases_found())
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        assert_eq!(normalize(""), "");
        assert_eq!(normalize("  Hello\tWorld \n"), "helloworld");
        assert_eq!(normalize("⼤模型"), "大模型");
        assert_eq!(normalize("ＲＡＧ　系统"), "rag系统");
        assert_eq!(normalize("e\u{301}"), "é");
        assert_eq!(normalize("E\u{301}Z"), "éz");
        assert_eq!(normalize("ΟΔΟΣ οδος"), "οδοσοδοσ");
        assert_eq!(normalize("a\u{200B}b\u{AD}c\u{FEFF}"), "abc");
        assert_eq!(normalize("ﬁle"), "file");
        // Hangul: a syllable followed by a trailing jamo composes.
        assert_eq!(normalize("\u{AC00}\u{11A8}"), "\u{AC01}");
        assert_eq!(normalize("\u{1100}\u{1161}"), "\u{AC00}");
    }

    #[test]
    fn hyphenation() {
        assert_eq!(normalize("retrie-\nval"), "retrie-val");
        assert_eq!(normalize_dehyphenated("retrie-\nval").as_deref(), Some("retrieval"));
        assert_eq!(normalize_dehyphenated("retrie-  \r\n  val"), Some("retrieval".into()));
        assert_eq!(normalize_dehyphenated("a - \nb"), None); // hyphen after a space
        assert_eq!(normalize_dehyphenated("a-b"), None);
        assert_eq!(normalize_dehyphenated("a-\n"), None); // nothing follows
        assert_eq!(normalize_dehyphenated("a-x\nb"), None);
        assert_eq!(normalize_dehyphenated("re\u{2010}\ntrieval"), Some("retrieval".into()));
        assert_eq!(normalize_dehyphenated("re\u{FF0D}\ntrieval"), Some("retrieval".into()));
        assert_eq!(normalize_dehyphenated("a-\n-\nb"), Some("a-b".into()));
        let m = PhraseMatcher::new(["retrieval", "state-of-the-art"]).unwrap();
        assert_eq!(m.found_in("Retrie-\nval is state-of-the-\nart"), vec![true, true]);
    }

    #[test]
    fn stable_set_is_really_stable() {
        use unicode_normalization::char::{canonical_combining_class, decompose_canonical};
        let stable: Vec<char> = (0u32..0x11_0000).filter_map(char::from_u32).filter(|&c| is_stable_nonascii(c)).collect();
        for &c in &stable {
            let s = c.to_string();
            assert_eq!(s.nfkc().collect::<String>(), s, "{c:?} not NFKC-stable");
            assert_eq!(canonical_combining_class(c), 0);
            assert_eq!(c.to_lowercase().collect::<String>(), s);
            assert!(!c.is_whitespace());
        }
        // Never a non-initial element of a canonical decomposition (so never
        // the second element of a composition).
        for y in (0u32..0x11_0000).filter_map(char::from_u32) {
            let mut parts = Vec::new();
            decompose_canonical(y, |d| parts.push(d));
            for &p in parts.iter().skip(1) {
                assert!(!is_stable(p), "{p:?} appears inside the decomposition of {y:?}");
            }
        }
    }

    #[test]
    fn fast_path_equals_plain_nfkc() {
        // Every stable character next to combining marks, full-width forms and ASCII.
        let pieces = ["a", "e\u{301}", "\u{301}", "大", "\u{3099}", "か", "Ａ", "\u{2F24}", " ", "\u{3000}", "-", "\n", "가", "\u{11A8}", "Σ", "İ"];
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let s = format!("{a}{b}{c}");
                    let reference: String = s
                        .nfkc()
                        .filter(|ch| !ch.is_whitespace() && !is_invisible(*ch))
                        .flat_map(|ch| ch.to_lowercase())
                        .map(|ch| if ch == 'ς' { 'σ' } else { ch })
                        .collect();
                    assert_eq!(normalize(&s), reference, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn file_names() {
        let f = |a: &str, b: &str| file_matches(&normalize_file_name(a), &normalize_file_name(b));
        assert!(f("Guide.PDF", "docs/guide.pdf"));
        assert!(f("docs\\guide.pdf", "./docs/guide.pdf"));
        assert!(f("a/guide.pdf", "/kb/a/guide.pdf"));
        assert!(!f("a/guide.pdf", "b/guide.pdf"));
        assert!(!f("guide.pdf", "myguide.pdf"));
        assert!(!f("", "x"));
        assert!(f("caf\u{e9}.md", "cafe\u{301}.md"));
    }

    #[test]
    fn batch_rules() {
        // case 0: files + evidence; case 1: evidence only; case 2: files only;
        // case 3: unlabelled; case 4: only an empty phrase + file.
        let expected_files = vec!["a.md", "b.md", "c.md", "d.md"];
        let file_offsets = [0, 2, 2, 3, 3, 4];
        let phrases = vec!["Alpha Beta", "gamma", "ＤＥＬＴＡ", "   "];
        let phrase_offsets = [0, 2, 3, 3, 3, 4];
        let chunk_files = vec!["x/b.md", "a.md", "c.md", "zz.md", "c.md", "q.md", "q.md", "D.md", "e.md"];
        let chunk_texts = vec!["gamma ray", "alpha\nbeta", "alpha beta", "the delta", "anything", "x", "y", "any", "any"];
        let chunk_offsets = [0, 3, 4, 6, 7, 9];
        let b = EvidenceBatch {
            file_offsets: &file_offsets,
            expected_files: &expected_files,
            phrase_offsets: &phrase_offsets,
            phrases: &phrases,
            chunk_offsets: &chunk_offsets,
            chunk_files: &chunk_files,
            chunk_texts: &chunk_texts,
        };
        let r = match_evidence(&b).unwrap();
        assert_eq!(r.labeled, vec![true, true, true, false, true]);
        assert_eq!(r.file_match, vec![true, true, false, true, true, false, true, true, false]);
        assert_eq!(r.relevant, vec![true, true, false, true, true, false, false, true, false]);
        assert_eq!(r.phrases_found, vec![1, 1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(r.phrase_first_rank, vec![2, 1, 1, 0]);
        assert_eq!(r.phrase_any_rank, vec![2, 1, 1, 0]);
        assert_eq!(r.phrase_empty, vec![false, false, false, true]);
        assert_eq!(r.file_first_rank, vec![2, 1, 1, 1]);

        let everywhere = phrases_in_texts(&phrases, &chunk_texts).unwrap();
        assert_eq!(everywhere, vec![true, true, true, false]);
        assert!(r.phrase_in_run.is_empty());
        let wide = match_evidence_with(&b, true).unwrap();
        assert_eq!(wide.phrase_in_run, everywhere);
        assert_eq!(EvidenceResult { phrase_in_run: Vec::new(), ..wide }, r);
    }

    #[test]
    fn run_wide_index_finds_phrases_of_other_cases() {
        // Case 0's phrases occur only in case 1's chunks and vice versa; every
        // length class (short automaton, 4-byte and 8-byte windows), a phrase
        // at the very start and end of a text, a broken line, and a duplicate.
        let phrases = vec!["ab", "Wxyz", "Kangxi ⼤模型 phrase", "endofthetext", "retrieval", "nowhere at all", "wxyz"];
        let phrase_offsets = [0, 3, 7];
        let chunk_texts = vec!["nothing here", "AB wx yz", "kangxi 大模型 PHRASE in the middle", "x endofthetext", "retrie-\nval", "zz"];
        let chunk_files = vec!["f"; 6];
        let chunk_offsets = [0, 2, 6];
        let empty: Vec<&str> = vec![];
        let b = EvidenceBatch {
            file_offsets: &[0, 0, 0],
            expected_files: &empty,
            phrase_offsets: &phrase_offsets,
            phrases: &phrases,
            chunk_offsets: &chunk_offsets,
            chunk_files: &chunk_files,
            chunk_texts: &chunk_texts,
        };
        let r = match_evidence_with(&b, true).unwrap();
        assert_eq!(r.phrase_in_run, vec![true, true, true, true, true, false, true]);
        // Case 0 finds "ab" and "wxyz" in its own second chunk, not the kangxi phrase.
        assert_eq!(r.phrase_any_rank, vec![2, 2, 0, 2, 3, 0, 0]);
        assert_eq!(phrases_in_texts(&phrases, &chunk_texts).unwrap(), r.phrase_in_run);
    }

    #[test]
    fn run_index_agrees_with_naive_search() {
        // Many phrases sharing prefixes (the greedy window choice), random texts.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet: Vec<char> = "abcde大模型 -\n".chars().collect();
        let texts: Vec<String> = (0..300)
            .map(|_| (0..(next() % 120) as usize).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect())
            .collect();
        let mut phrases: Vec<String> = (0..400)
            .map(|_| (0..(1 + next() % 12) as usize).map(|_| alphabet[(next() % 8) as usize]).collect())
            .collect();
        phrases.extend((0..200).map(|i| format!("evidence{i:04}")));
        phrases.push("evidence0007".into());
        phrases.push(String::new());
        let norm_texts: Vec<(String, Option<String>)> = texts.iter().map(|t| (normalize(t), normalize_dehyphenated(t))).collect();
        let naive: Vec<bool> = phrases
            .iter()
            .map(|p| {
                let p = normalize(p);
                !p.is_empty() && norm_texts.iter().any(|(a, d)| a.contains(&p) || d.as_deref().is_some_and(|d| d.contains(&p)))
            })
            .collect();
        assert!(naive.iter().any(|&f| f) && naive.iter().any(|&f| !f));
        assert_eq!(phrases_in_texts(&phrases, &texts).unwrap(), naive);
    }

    #[test]
    fn bulk_normalisation_matches_char_by_char() {
        // Long ASCII/CJK runs with hyphens and breaks across the bulk pieces.
        for s in ["Retrie-\nval  AND  Aug-  \r\n  mented", "abc-\n-\ndef", "-\nx", "大模型-\n大 模 型", "a -\nb", "x-\n", "ABCDEFGHIJKLMNOP-\nQRSTUVWXYZ 0123456789\t"] {
            let reference: String = s.nfkc().filter(|ch| !ch.is_whitespace()).flat_map(|ch| ch.to_lowercase()).collect();
            assert_eq!(normalize(s), reference, "{s:?}");
        }
        assert_eq!(normalize_dehyphenated("ABCDEFGHIJKLMNOP-\nQRSTUVWXYZ").as_deref(), Some("abcdefghijklmnopqrstuvwxyz"));
        assert_eq!(normalize_dehyphenated("大模型-\n大 模 型").as_deref(), Some("大模型大模型"));
        assert_eq!(normalize_dehyphenated("a -\nb"), None);
    }

    #[test]
    fn bad_offsets() {
        let empty: Vec<&str> = vec![];
        let texts = vec!["a"];
        let b = EvidenceBatch {
            file_offsets: &[0, 1],
            expected_files: &empty,
            phrase_offsets: &[0, 0],
            phrases: &empty,
            chunk_offsets: &[0, 1],
            chunk_files: &texts,
            chunk_texts: &texts,
        };
        let err = match_evidence(&b).unwrap_err();
        assert!(err.to_string().contains("expected-file offsets"), "{err}");
    }

    #[test]
    fn many_patterns_use_overlapping_search() {
        let mut phrases: Vec<String> = (0..40).map(|i| format!("zz{i}zz")).collect();
        phrases.extend(["abc".to_string(), "bcd".to_string(), "b".to_string()]);
        let m = PhraseMatcher::new(phrases.iter().map(String::as_str)).unwrap();
        let found = m.found_in("xABcd zz7zz");
        assert_eq!(found.iter().filter(|&&f| f).count(), 4);
        assert!(found[7] && found[40] && found[41] && found[42]);
    }

    #[test]
    fn duplicate_and_overlapping_phrases() {
        let m = PhraseMatcher::new(["abc", "ABC", "bcd", "b", "zzz"]).unwrap();
        assert_eq!(m.found_in("xabcd"), vec![true, true, true, true, false]);
    }

    // -- Shared vectors (also read by tests/test_evidence.py) ----------------

    const VECTORS: &str = include_str!("../../../testdata/evidence_vectors.json");

    #[test]
    fn shared_vectors() {
        let root = json::parse(VECTORS).expect("valid JSON");
        let normalize_cases = root.get("normalize").and_then(json::Value::as_array).expect("normalize list");
        assert!(normalize_cases.len() >= 5);
        for case in normalize_cases {
            let name = case.get("name").and_then(json::Value::as_str).unwrap_or("?");
            let input = case.get("input").and_then(json::Value::as_str).expect("input");
            let expected = case.get("expected").and_then(json::Value::as_str).expect("expected");
            assert_eq!(normalize(input), expected, "vector {name}");
            let dehy = case.get("dehyphenated").and_then(json::Value::as_str);
            assert_eq!(normalize_dehyphenated(input).as_deref(), dehy, "vector {name} (dehyphenated)");
        }
        let match_cases = root.get("match").and_then(json::Value::as_array).expect("match list");
        assert!(match_cases.len() >= 5);
        for case in match_cases {
            let name = case.get("name").and_then(json::Value::as_str).unwrap_or("?");
            let text = case.get("text").and_then(json::Value::as_str).expect("text");
            let phrases: Vec<&str> = case.get("phrases").and_then(json::Value::as_array).expect("phrases").iter().map(|p| p.as_str().expect("phrase")).collect();
            let found: Vec<bool> = case.get("found").and_then(json::Value::as_array).expect("found").iter().map(|p| p.as_bool().expect("bool")).collect();
            let m = PhraseMatcher::new(phrases.iter().copied()).unwrap();
            assert_eq!(m.found_in(text), found, "vector {name}");
        }
    }

    /// A minimal JSON reader, enough for the test vectors (no dependency).
    mod json {
        #[derive(Debug, Clone, PartialEq)]
        pub enum Value {
            Null,
            Bool(bool),
            Num(f64),
            Str(String),
            Arr(Vec<Value>),
            Obj(Vec<(String, Value)>),
        }

        impl Value {
            pub fn get(&self, key: &str) -> Option<&Value> {
                match self {
                    Value::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                    _ => None,
                }
            }
            pub fn as_str(&self) -> Option<&str> {
                match self {
                    Value::Str(s) => Some(s),
                    _ => None,
                }
            }
            pub fn as_array(&self) -> Option<&Vec<Value>> {
                match self {
                    Value::Arr(a) => Some(a),
                    _ => None,
                }
            }
            pub fn as_bool(&self) -> Option<bool> {
                match self {
                    Value::Bool(b) => Some(*b),
                    _ => None,
                }
            }
        }

        pub fn parse(s: &str) -> Result<Value, String> {
            let mut p = Parser { c: s.chars().collect(), i: 0 };
            let v = p.value()?;
            p.ws();
            if p.i != p.c.len() {
                return Err(format!("trailing data at {}", p.i));
            }
            Ok(v)
        }

        struct Parser {
            c: Vec<char>,
            i: usize,
        }

        impl Parser {
            fn ws(&mut self) {
                while self.i < self.c.len() && self.c[self.i].is_ascii_whitespace() {
                    self.i += 1;
                }
            }
            fn peek(&self) -> Option<char> {
                self.c.get(self.i).copied()
            }
            fn eat(&mut self, ch: char) -> Result<(), String> {
                self.ws();
                if self.peek() == Some(ch) {
                    self.i += 1;
                    Ok(())
                } else {
                    Err(format!("expected {ch:?} at {}", self.i))
                }
            }
            fn lit(&mut self, word: &str, v: Value) -> Result<Value, String> {
                for ch in word.chars() {
                    if self.peek() != Some(ch) {
                        return Err(format!("bad literal at {}", self.i));
                    }
                    self.i += 1;
                }
                Ok(v)
            }
            fn value(&mut self) -> Result<Value, String> {
                self.ws();
                match self.peek().ok_or("unexpected end")? {
                    '{' => {
                        self.i += 1;
                        let mut kv = Vec::new();
                        self.ws();
                        if self.peek() == Some('}') {
                            self.i += 1;
                            return Ok(Value::Obj(kv));
                        }
                        loop {
                            self.ws();
                            let k = self.string()?;
                            self.eat(':')?;
                            kv.push((k, self.value()?));
                            self.ws();
                            match self.peek() {
                                Some(',') => self.i += 1,
                                Some('}') => {
                                    self.i += 1;
                                    return Ok(Value::Obj(kv));
                                }
                                _ => return Err(format!("expected , or }} at {}", self.i)),
                            }
                        }
                    }
                    '[' => {
                        self.i += 1;
                        let mut a = Vec::new();
                        self.ws();
                        if self.peek() == Some(']') {
                            self.i += 1;
                            return Ok(Value::Arr(a));
                        }
                        loop {
                            a.push(self.value()?);
                            self.ws();
                            match self.peek() {
                                Some(',') => self.i += 1,
                                Some(']') => {
                                    self.i += 1;
                                    return Ok(Value::Arr(a));
                                }
                                _ => return Err(format!("expected , or ] at {}", self.i)),
                            }
                        }
                    }
                    '"' => Ok(Value::Str(self.string()?)),
                    't' => self.lit("true", Value::Bool(true)),
                    'f' => self.lit("false", Value::Bool(false)),
                    'n' => self.lit("null", Value::Null),
                    _ => {
                        let start = self.i;
                        while self.peek().is_some_and(|c| c.is_ascii_digit() || "+-.eE".contains(c)) {
                            self.i += 1;
                        }
                        let s: String = self.c[start..self.i].iter().collect();
                        s.parse().map(Value::Num).map_err(|_| format!("bad number at {start}"))
                    }
                }
            }
            fn hex4(&mut self) -> Result<u32, String> {
                let s: String = self.c.get(self.i..self.i + 4).ok_or("short \\u escape")?.iter().collect();
                self.i += 4;
                u32::from_str_radix(&s, 16).map_err(|_| format!("bad \\u escape {s}"))
            }
            fn string(&mut self) -> Result<String, String> {
                if self.peek() != Some('"') {
                    return Err(format!("expected string at {}", self.i));
                }
                self.i += 1;
                let mut out = String::new();
                loop {
                    let ch = self.peek().ok_or("unterminated string")?;
                    self.i += 1;
                    match ch {
                        '"' => return Ok(out),
                        '\\' => {
                            let e = self.peek().ok_or("bad escape")?;
                            self.i += 1;
                            match e {
                                '"' | '\\' | '/' => out.push(e),
                                'b' => out.push('\u{8}'),
                                'f' => out.push('\u{c}'),
                                'n' => out.push('\n'),
                                'r' => out.push('\r'),
                                't' => out.push('\t'),
                                'u' => {
                                    let hi = self.hex4()?;
                                    let code = if (0xD800..0xDC00).contains(&hi) {
                                        if self.peek() != Some('\\') {
                                            return Err("lone surrogate".into());
                                        }
                                        self.i += 2; // \u
                                        let lo = self.hex4()?;
                                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                    } else {
                                        hi
                                    };
                                    out.push(char::from_u32(code).ok_or("bad code point")?);
                                }
                                _ => return Err(format!("bad escape \\{e}")),
                            }
                        }
                        _ => out.push(ch),
                    }
                }
            }
        }
    }
}
