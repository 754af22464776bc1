//! A test on a text *before* normalising it that rules out that its normalised
//! form contains any of a few phrases: the run-wide check uses it to skip
//! normalising the texts that cannot hold a phrase found in no case of its own.
//!
//! A phrase contains each of its characters, so a text whose normalised form
//! lacks one chosen character `r` of every phrase holds none of them. `r`
//! appears in the normalised form only if the text has a *source* of `r`
//! (see [`Sources`]); the test searches the raw UTF-8 for the sources of the
//! chosen characters (an Aho-Corasick search, a packed SIMD one when they are
//! few). A text with no source is skipped without changing any answer; a text
//! with one is normalised and probed as before.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;
use unicode_normalization::char::{decompose_canonical, decompose_compatible};

/// For a character `r` of normalised text, every character whose presence in
/// a raw text is needed for `r` to appear in its normalisation.
///
/// The normalised form is NFKC, then per-character lower-casing (and `ς` to
/// `σ`); removing white space, invisible characters or line-break hyphens
/// never adds a character. So `r` comes from a character `t` of the NFKC
/// output with `r` in `t`'s lower case (or `t = ς`, `r = σ`). NFKC is the
/// canonical composition of the NFKD of the text, and the NFKD of a text has
/// the characters of the NFKD of each of its characters: `t` either is in
/// it, or is composed from its canonical decomposition, whose first character
/// `s` is in it. So the text has a character `c` whose NFKD contains `s`
/// (`s` itself among them).
pub(super) struct Sources {
    /// Characters whose lower case contains the key (other than the key).
    upper: FxHashMap<char, Vec<char>>,
    /// Characters whose NFKD contains the key (other than the key).
    decomposing: FxHashMap<char, Vec<char>>,
}

impl Sources {
    fn build() -> Sources {
        let mut upper: FxHashMap<char, Vec<char>> = FxHashMap::default();
        let mut decomposing: FxHashMap<char, Vec<char>> = FxHashMap::default();
        let mut parts = Vec::new();
        for c in (0u32..0x11_0000).filter_map(char::from_u32) {
            for l in c.to_lowercase().filter(|&l| l != c) {
                upper.entry(l).or_default().push(c);
            }
            parts.clear();
            decompose_compatible(c, |d| parts.push(d));
            parts.sort_unstable();
            parts.dedup();
            for &d in parts.iter().filter(|&&d| d != c) {
                decomposing.entry(d).or_default().push(c);
            }
        }
        upper.entry('σ').or_default().push('ς');
        Sources { upper, decomposing }
    }

    pub(super) fn get() -> &'static Sources {
        static SOURCES: OnceLock<Sources> = OnceLock::new();
        SOURCES.get_or_init(Sources::build)
    }

    /// The sources of `r`, sorted, without repeats.
    pub(super) fn of(&self, r: char) -> Vec<char> {
        let mut out = Vec::new();
        for t in std::iter::once(r).chain(self.upper.get(&r).into_iter().flatten().copied()) {
            let mut starter = t;
            decompose_canonical(t, |d| {
                if starter == t {
                    starter = d;
                }
            });
            // `decompose_canonical` calls back with `t` itself when it has no decomposition.
            out.push(starter);
            out.extend(self.decomposing.get(&starter).into_iter().flatten().copied());
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Above this many source characters in all the test is not tried (a
/// phrase of letters only needs every accented form of a letter).
const MAX_SOURCES: usize = 4096;

/// The packed SIMD searcher takes up to 128 patterns: beyond that the
/// sources' UTF-8 is cut to shorter prefixes (a prefix occurs wherever its
/// character does: more texts pass, none wrongly skipped).
const MAX_PATTERNS: usize = 128;

/// The raw-text test for a set of normalised phrases.
pub(super) struct RawPrefilter {
    /// `None`: no useful test, every text may contain a phrase.
    search: Option<Search>,
}

// One per prefilter, read on every text: boxing the automaton would only add a load to each test.
#[allow(clippy::large_enum_variant)]
enum Search {
    /// Patterns of several bytes: aho-corasick (its packed searcher when it can).
    Patterns(AhoCorasick),
    /// Patterns of one byte each (ASCII characters, lead bytes): a byte-set scan,
    /// far faster than aho-corasick on such patterns.
    Bytes(ByteSet),
}

impl RawPrefilter {
    /// The test for `phrases` (normalised, non-empty). Each phrase may be
    /// represented by one of its characters of the least cost: occurrences in
    /// `sample` (a few normalised texts of the run) plus number of sources;
    /// among those, characters are chosen
    /// greedily, the one shared by the most phrases not yet represented first
    /// (then the one with the fewest sources), until every phrase is. The
    /// sources are searched as bytes or as patterns, whichever rules out
    /// more of `raw_sample` (the same texts, raw), the bytes when about equal;
    /// no test when most of the sample would pass.
    pub(super) fn new<S: AsRef<str>, T: AsRef<[u8]>, R: AsRef<str>>(phrases: &[S], sample: &[T], raw_sample: &[R]) -> RawPrefilter {
        let mut counts: FxHashMap<char, u32> = FxHashMap::default();
        for t in sample {
            for c in String::from_utf8_lossy(t.as_ref()).chars() {
                *counts.entry(c).or_default() += 1;
            }
        }
        let sources = Sources::get();
        let mut of_char: FxHashMap<char, Vec<char>> = FxHashMap::default();
        for p in phrases {
            for r in p.as_ref().chars() {
                of_char.entry(r).or_insert_with(|| sources.of(r));
            }
        }
        // A character's cost: its occurrences in the sample plus its number of
        // sources (each a pattern that may occur in a text, and many sources
        // force shorter, less selective patterns).
        let cost = |r: &char| counts.get(r).copied().unwrap_or(0) as usize + of_char[r].len();
        let rarest: Vec<Vec<char>> = phrases.iter().map(|p| cheapest_chars(p.as_ref(), &cost)).filter(|r| !r.is_empty()).collect();
        let sources_of = |r: char| of_char[&r].len();
        let Some(chosen) = greedy_cover(&rarest, &sources_of, MAX_SOURCES) else {
            return RawPrefilter { search: None };
        };
        let mut all: Vec<char> = chosen.iter().flat_map(|r| of_char[r].iter().copied()).collect();
        all.sort_unstable();
        all.dedup();
        let patterns = utf8_prefixes(&all, MAX_PATTERNS);
        let bytes = Search::Bytes(ByteSet::new(patterns.iter().map(|p| p[0])));
        // Leftmost-first lets aho-corasick use its packed searcher. A build
        // error (none is expected for these few short patterns) only loses the shortcut.
        let longer = AhoCorasick::builder().match_kind(MatchKind::LeftmostFirst).build(&patterns).ok().map(Search::Patterns);
        let passed = |s: &Search| raw_sample.iter().filter(|t| s.may_contain(t.as_ref())).count();
        // The byte set is several times faster: taken unless it passes many more texts.
        let bytes_passed = passed(&bytes);
        let longer = longer.map(|p| {
            let n = passed(&p);
            (p, n)
        });
        let (search, pass) = match longer {
            Some((p, n)) if n + raw_sample.len() / 16 < bytes_passed => (p, n),
            _ => (bytes, bytes_passed),
        };
        // Where it passes most texts of the sample, the test costs more than it saves.
        RawPrefilter { search: (pass * 4 <= raw_sample.len() * 3).then_some(search) }
    }

    /// False only when the normalised form of `raw` contains none of the phrases.
    #[inline]
    pub(super) fn may_contain(&self, raw: &str) -> bool {
        self.search.as_ref().is_none_or(|s| s.may_contain(raw))
    }

    /// Whether the test can skip anything (tests).
    #[cfg(test)]
    pub(super) fn is_useful(&self) -> bool {
        self.search.is_some()
    }
}

/// Characters that cover every set of `sets` (a set is covered by any of its
/// characters), chosen greedily: the one in the most sets not yet covered,
/// then the one with the fewest sources, then the lower character. `None`
/// once the chosen characters have more than `max_sources` sources in all.
///
/// Counts only fall as sets are covered, so a heap of possibly stale counts
/// gives the same choice as recounting every set each round (which was
/// quadratic: with 20,000 orphans of Chinese text, each its own rare
/// character, about 1.4 s of a 4.7 s match and check).
fn greedy_cover(sets: &[Vec<char>], sources_of: &impl Fn(char) -> usize, max_sources: usize) -> Option<Vec<char>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let mut sets_of: FxHashMap<char, Vec<usize>> = FxHashMap::default();
    for (i, set) in sets.iter().enumerate() {
        for &c in set {
            sets_of.entry(c).or_default().push(i);
        }
    }
    let mut count: FxHashMap<char, usize> = sets_of.iter().map(|(&c, of)| (c, of.len())).collect();
    let mut heap: BinaryHeap<(usize, Reverse<usize>, Reverse<char>)> =
        count.iter().map(|(&c, &n)| (n, Reverse(sources_of(c)), Reverse(c))).collect();
    let mut covered = vec![false; sets.len()];
    let mut left = sets.len();
    let (mut chosen, mut sources) = (Vec::new(), 0);
    while left > 0 {
        let (n, cost, Reverse(r)) = heap.pop().expect("a set left has a character");
        let now = count[&r];
        if now != n {
            if now > 0 {
                heap.push((now, cost, Reverse(r)));
            }
            continue;
        }
        chosen.push(r);
        sources += cost.0;
        for &i in &sets_of[&r] {
            if !std::mem::replace(&mut covered[i], true) {
                left -= 1;
                for c in &sets[i] {
                    *count.get_mut(c).expect("counted") -= 1;
                }
            }
        }
        if sources > max_sources {
            return None;
        }
    }
    Some(chosen)
}

/// The characters of `phrase` of the least `cost`, without repeats.
fn cheapest_chars(phrase: &str, cost: &impl Fn(&char) -> usize) -> Vec<char> {
    let Some(least) = phrase.chars().map(|c| cost(&c)).min() else { return Vec::new() };
    let mut out: Vec<char> = phrase.chars().filter(|c| cost(c) == least).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The UTF-8 of `chars`, each cut to the longest length (4 down to 1 byte)
/// that leaves at most `limit` distinct patterns.
fn utf8_prefixes(chars: &[char], limit: usize) -> Vec<Vec<u8>> {
    let mut buf = [0u8; 4];
    let full: Vec<Vec<u8>> = chars.iter().map(|c| c.encode_utf8(&mut buf).as_bytes().to_vec()).collect();
    let mut len = 4;
    loop {
        let mut cut: Vec<Vec<u8>> = full.iter().map(|p| p[..p.len().min(len)].to_vec()).collect();
        cut.sort_unstable();
        cut.dedup();
        if cut.len() <= limit || len == 1 {
            return cut;
        }
        len -= 1;
    }
}

impl Search {
    #[inline]
    fn may_contain(&self, raw: &str) -> bool {
        match self {
            Search::Patterns(ac) => ac.is_match(raw),
            Search::Bytes(set) => set.any_in(raw.as_bytes()),
        }
    }
}

/// A set of byte values, tested sixteen bytes at a time where the CPU can.
struct ByteSet {
    member: [bool; 256],
    /// For the SIMD test: bit `h` of `low_a[l]` is set when byte `h << 4 | l`
    /// (`h < 8`) is a member, bit `h - 8` of `low_b[l]` for `h >= 8`.
    low_a: [u8; 16],
    low_b: [u8; 16],
}

impl ByteSet {
    fn new(bytes: impl Iterator<Item = u8>) -> ByteSet {
        let mut set = ByteSet { member: [false; 256], low_a: [0; 16], low_b: [0; 16] };
        for b in bytes {
            set.member[b as usize] = true;
            let (high, low) = ((b >> 4) as usize, (b & 0x0F) as usize);
            if high < 8 {
                set.low_a[low] |= 1 << high;
            } else {
                set.low_b[low] |= 1 << (high - 8);
            }
        }
        set
    }

    fn any_in(&self, text: &[u8]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("ssse3") {
            // SAFETY: the CPU has SSSE3.
            return unsafe { self.any_in_ssse3(text) };
        }
        text.iter().any(|&b| self.member[b as usize])
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "ssse3")]
    unsafe fn any_in_ssse3(&self, text: &[u8]) -> bool {
        use std::arch::x86_64::*;
        // Bit `h` (resp. `h - 8`) for a high nibble `h` below (resp. from) 8, zero otherwise.
        let high_a = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0);
        let high_b = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128);
        // SAFETY: 16-byte tables, unaligned loads.
        let (low_a, low_b) = unsafe { (_mm_loadu_si128(self.low_a.as_ptr() as *const __m128i), _mm_loadu_si128(self.low_b.as_ptr() as *const __m128i)) };
        let nibble = _mm_set1_epi8(0x0F);
        let zero = _mm_setzero_si128();
        // Non-zero bytes where `v` has members.
        let hits = |v: __m128i| {
            let low = _mm_and_si128(v, nibble);
            let high = _mm_and_si128(_mm_srli_epi16(v, 4), nibble);
            let a = _mm_and_si128(_mm_shuffle_epi8(low_a, low), _mm_shuffle_epi8(high_a, high));
            let b = _mm_and_si128(_mm_shuffle_epi8(low_b, low), _mm_shuffle_epi8(high_b, high));
            _mm_or_si128(a, b)
        };
        // 64 bytes a step with one branch: texts without members are the common case.
        let mut wide = text.chunks_exact(64);
        for block in &mut wide {
            let p = block.as_ptr() as *const __m128i;
            // SAFETY: `block` has 64 bytes.
            let any = unsafe {
                _mm_or_si128(
                    _mm_or_si128(hits(_mm_loadu_si128(p)), hits(_mm_loadu_si128(p.add(1)))),
                    _mm_or_si128(hits(_mm_loadu_si128(p.add(2))), hits(_mm_loadu_si128(p.add(3)))),
                )
            };
            if _mm_movemask_epi8(_mm_cmpeq_epi8(any, zero)) != 0xFFFF {
                return true;
            }
        }
        let mut blocks = wide.remainder().chunks_exact(16);
        for block in &mut blocks {
            // SAFETY: `block` has 16 bytes.
            let v = unsafe { _mm_loadu_si128(block.as_ptr() as *const __m128i) };
            if _mm_movemask_epi8(_mm_cmpeq_epi8(hits(v), zero)) != 0xFFFF {
                return true;
            }
        }
        blocks.remainder().iter().any(|&b| self.member[b as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::xorshift;
    use super::{greedy_cover, ByteSet};

    /// The greedy choice recounted from scratch each round (what `greedy_cover` must equal).
    fn recounted_cover(sets: &[Vec<char>], sources_of: &impl Fn(char) -> usize, max_sources: usize) -> Option<Vec<char>> {
        let mut chosen: Vec<char> = Vec::new();
        let mut left: Vec<&Vec<char>> = sets.iter().collect();
        while !left.is_empty() {
            let mut shared: std::collections::HashMap<char, usize> = std::collections::HashMap::new();
            for &r in left.iter().flat_map(|cs| cs.iter()) {
                *shared.entry(r).or_default() += 1;
            }
            let r = shared
                .into_iter()
                .max_by_key(|&(r, n)| (n, std::cmp::Reverse(sources_of(r)), std::cmp::Reverse(r)))
                .map(|(r, _)| r)
                .expect("a set left has a character");
            chosen.push(r);
            left.retain(|cs| !cs.contains(&r));
            if chosen.iter().map(|&c| sources_of(c)).sum::<usize>() > max_sources {
                return None;
            }
        }
        Some(chosen)
    }

    #[test]
    fn greedy_cover_equals_the_recounted_choice() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
        for round in 0..3000 {
            let alphabet = 1 + next() % 40;
            let sets: Vec<Vec<char>> = (0..next() % 60)
                .map(|_| {
                    let mut set: Vec<char> = (0..1 + next() % 4).map(|_| char::from_u32(0x4E00 + (next() % alphabet) as u32).unwrap()).collect();
                    set.sort_unstable();
                    set.dedup();
                    set
                })
                .collect();
            let weights = next();
            let sources_of = move |c: char| 1 + ((c as u64).wrapping_mul(weights) >> 61) as usize;
            let max_sources = if round % 3 == 0 { (next() % 30) as usize } else { usize::MAX };
            assert_eq!(greedy_cover(&sets, &sources_of, max_sources), recounted_cover(&sets, &sources_of, max_sources), "round {round}: {sets:?}");
        }
    }

    #[test]
    fn byte_set_agrees_with_a_table_lookup() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
        for round in 0..2000 {
            let members: Vec<u8> = (0..1 + next() % 6).map(|_| next() as u8).collect();
            let set = ByteSet::new(members.iter().copied());
            let text: Vec<u8> = (0..next() % 70).map(|_| next() as u8).collect();
            let want = text.iter().any(|b| members.contains(b));
            assert_eq!(set.any_in(&text), want, "round {round}: {members:?} in {text:?}");
        }
    }
}
