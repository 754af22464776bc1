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
#[inline]
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

#[inline]
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
    /// of [`is_stable_nonascii`]) is final as it stands, except its last
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
    /// leaves bytes >= 0x80 alone).
    fn direct(&mut self, s: &[u8]) {
        let len = s.len();
        let mut j = 0;
        while j < len {
            let start = j;
            while j < len && REGULAR[s[j] as usize] {
                j += 1;
            }
            if j > start {
                self.non_space();
                self.out.extend(s[start..j].iter().map(u8::to_ascii_lowercase));
            }
            if j < len {
                self.push_ascii(s[j]);
                j += 1;
            }
        }
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

/// Bytes copied as they are by [`Normalizer::direct`]: anything but ASCII
/// white space and `-` (non-ASCII bytes there belong to stable characters).
static REGULAR: [bool; 256] = {
    let mut t = [true; 256];
    t[b' ' as usize] = false;
    t[b'\t' as usize] = false;
    t[b'\n' as usize] = false;
    t[0x0B] = false;
    t[0x0C] = false;
    t[b'\r' as usize] = false;
    t[b'-' as usize] = false;
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

/// Up to this many patterns, [`PhraseMatcher::scan`] uses a leftmost-first search.
pub const FEW_PATTERNS: usize = 16;

/// An Aho-Corasick automaton over the unique, non-empty normalised phrases of
/// one case.
pub struct PhraseMatcher {
    ac: Option<AhoCorasick>,
    patterns: Vec<String>,
    /// For each automaton pattern, the indices of the input phrases it stands for.
    owners: Vec<Vec<u32>>,
    n_phrases: usize,
    empty: Vec<bool>,
}

impl PhraseMatcher {
    pub fn new<'p>(phrases: impl IntoIterator<Item = &'p str>) -> Result<Self> {
        let mut patterns: Vec<String> = Vec::new();
        let mut owners: Vec<Vec<u32>> = Vec::new();
        let mut empty = Vec::new();
        for (i, p) in phrases.into_iter().enumerate() {
            let norm = normalize(p);
            empty.push(norm.is_empty());
            if norm.is_empty() {
                continue;
            }
            match patterns.iter().position(|q| *q == norm) {
                Some(j) => owners[j].push(i as u32),
                None => {
                    patterns.push(norm);
                    owners.push(vec![i as u32]);
                }
            }
        }
        let ac = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(if patterns.len() > FEW_PATTERNS { MatchKind::Standard } else { MatchKind::LeftmostFirst })
                    .kind(Some(AhoCorasickKind::NoncontiguousNFA))
                    .build(&patterns)
                    .map_err(|e| Error::input(format!("cannot build the evidence matcher: {e}")))?,
            )
        };
        Ok(PhraseMatcher { ac, patterns, owners, n_phrases: empty.len(), empty })
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
        self.ac.is_some()
    }

    /// Per input phrase: did it normalise to the empty string?
    pub fn empty_flags(&self) -> &[bool] {
        &self.empty
    }

    /// Mark in `found` (one flag per unique pattern) the patterns occurring in
    /// `haystack`; returns how many were newly marked.
    ///
    /// With at most [`FEW_PATTERNS`] patterns (a case's phrases) the automaton
    /// is leftmost-first, whose SIMD prefilter is far faster on CJK text than
    /// an overlapping search: after a match starting at `s`, the other unfound
    /// patterns are compared at `s` directly and the search resumes at `s + 1`,
    /// so every pattern that occurs anywhere is found, overlapping or not.
    /// Larger sets use a standard overlapping search. Either way it stops as
    /// soon as all patterns are found.
    pub fn scan(&self, haystack: &[u8], found: &mut [bool]) -> usize {
        let Some(ac) = &self.ac else { return 0 };
        let total = found.len();
        let mut missing = found.iter().filter(|&&f| !f).count();
        let mut new = 0;
        if self.patterns.len() > FEW_PATTERNS {
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
        let mut at = 0;
        while missing > 0 && at < haystack.len() {
            let Some(m) = ac.find(Input::new(haystack).span(at..haystack.len())) else { break };
            let s = m.start();
            let p = m.pattern().as_usize();
            if !found[p] {
                found[p] = true;
                new += 1;
                missing -= 1;
            }
            if missing > 0 && total > 1 {
                for (q, pat) in self.patterns.iter().enumerate() {
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

fn match_case<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>, c: usize, scratch: &mut Scratch) -> Result<CaseOut> {
    let files: Vec<String> = (b.file_offsets[c]..b.file_offsets[c + 1])
        .map(|i| normalize_file_name(b.expected_files.get(i)))
        .collect();
    let matcher = PhraseMatcher::new((b.phrase_offsets[c]..b.phrase_offsets[c + 1]).map(|i| b.phrases.get(i)))?;
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

    let per_case: Vec<CaseOut> = (0..n_cases)
        .into_par_iter()
        .with_min_len(16)
        .map_init(
            || Scratch { norm: Normalizer::new(), dehy: Vec::new(), pat: Vec::new() },
            |scratch, c| match_case(b, c, scratch),
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
    Ok(res)
}

/// For each phrase, does it occur (after normalisation) in at least one of
/// `texts`? One automaton over all unique phrases, parallel over texts. Used
/// to flag evidence phrases that no retrieved chunk of a whole run contains.
pub fn phrases_in_texts<S: Strings + ?Sized, T: Strings + ?Sized>(phrases: &S, texts: &T) -> Result<Vec<bool>> {
    let matcher = PhraseMatcher::new((0..phrases.len()).map(|i| phrases.get(i)))?;
    let n_pat = matcher.patterns_len();
    let found = (0..texts.len())
        .into_par_iter()
        .with_min_len(64)
        .fold(
            || (Normalizer::new(), Vec::new(), vec![false; n_pat]),
            |(mut norm, mut dehy, mut pat), i| {
                norm.run(texts.get(i));
                matcher.scan(&norm.out, &mut pat);
                if norm.has_soft_hyphens() {
                    norm.dehyphenated_into(&mut dehy);
                    matcher.scan(&dehy, &mut pat);
                }
                (norm, dehy, pat)
            },
        )
        .map(|(_, _, pat)| pat)
        .reduce(|| vec![false; n_pat], |mut a, b| {
            a.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
            a
        });
    let mut out = vec![false; phrases.len()];
    for (p, f) in found.into_iter().enumerate() {
        if f {
            for &o in matcher.owners(p) {
                out[o as usize] = true;
            }
        }
    }
    Ok(out)
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
