//! Per-case phrase matching: a packed (Teddy) searcher or an Aho-Corasick automaton over a case's phrases.

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};
use rustc_hash::FxHashMap;

use super::normalize::{normalize, Normalizer};
use crate::error::{Error, Result};

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
        // Each phrase's pattern found by hash, not by a scan of the patterns so far (a
        // case with 80,000 phrases took 11 s to match, a million would take hours).
        let mut index: FxHashMap<&'p str, usize> = FxHashMap::default();
        for (i, norm) in phrases.into_iter().enumerate() {
            empty.push(norm.is_empty());
            if norm.is_empty() {
                continue;
            }
            let i = u32::try_from(i).map_err(|_| Error::input(format!("a case has more than {} evidence phrases", u32::MAX)))?;
            match index.get(norm) {
                Some(&j) => owners[j].push(i),
                None => {
                    index.insert(norm, patterns.len());
                    patterns.push(norm.to_string());
                    owners.push(vec![i]);
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
