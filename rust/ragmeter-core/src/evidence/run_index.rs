//! Run-wide phrase index: which phrases occur in any of many texts.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, MatchKind};

use crate::error::{Error, Result};


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
/// probe only every 2nd (13..14 bytes), 4th (15..18) or 8th (>= 19 bytes) position: such a
/// phrase indexes 4 or 8 consecutive windows, one of which starts at a probed
/// position wherever the phrase occurs. The windows of a phrase are chosen
/// among its offsets as those shared with the fewest other phrases. Phrases shorter than 4 bytes (rare) go through
/// an Aho-Corasick automaton. Phrases already found are skipped, a text
/// is not scanned at all once every phrase has been found, and
/// [`RunIndex::refresh`], called between batches of texts, drops the windows
/// of found phrases from the filters.
pub struct RunIndex {
    data: Vec<u8>,
    starts: Vec<usize>,
    found: Vec<AtomicBool>,
    remaining: AtomicUsize,
    /// 8-byte windows probed at every 8th, 4th, 2nd and every text position
    /// (phrases of >= 19, 15..18, 13..14 and 8..12 bytes: a phrase of `8 + s - 1`
    /// bytes or more has `s` consecutive windows; four bytes more leave at
    /// least five placements to choose the least shared from, which phrases
    /// with a common prefix need), 4-byte windows at every
    /// position (4..7 bytes).
    w8s8: Window,
    w8s4: Window,
    w8s2: Window,
    w8: Window,
    w4: Window,
    short: Option<(AhoCorasick, Vec<u32>)>,
    /// Phrases found when the filters were last filled (see [`RunIndex::refresh`]).
    found_at_fill: usize,
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

/// The windows of the sample of texts, as a bit set of their hashes (a
/// false positive only makes a window look common: a worse choice, never a
/// wrong answer). A hash set took longer than the matching of a small run.
pub(super) struct Seen {
    bits: Vec<u64>,
}

impl Seen {
    const SHIFT: u32 = 64 - 21;

    fn new() -> Self {
        Seen { bits: vec![0; 1 << (21 - 6)] }
    }

    /// No windows (for a run without the run-wide check).
    fn empty() -> Self {
        Seen { bits: Vec::new() }
    }

    /// The 4- and 8-byte windows of `sample` (a few normalised texts of the run).
    pub(super) fn of<T: AsRef<[u8]>>(sample: &[T]) -> Self {
        if sample.is_empty() {
            return Seen::empty();
        }
        let mut common = Seen::new();
        for t in sample {
            let t = t.as_ref();
            for i in 0..t.len().saturating_sub(3) {
                common.insert(u32::from_le_bytes(t[i..i + 4].try_into().expect("4 bytes")) as u64);
                if i + 8 <= t.len() {
                    common.insert(u64::from_le_bytes(t[i..i + 8].try_into().expect("8 bytes")));
                }
            }
        }
        common
    }

    #[inline]
    fn slot(key: u64) -> (usize, u64) {
        let h = (key ^ 0x6A09_E667_F3BC_C909).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> Self::SHIFT;
        ((h >> 6) as usize, 1 << (h & 63))
    }

    fn insert(&mut self, key: u64) {
        let (w, m) = Self::slot(key);
        self.bits[w] |= m;
    }

    fn contains(&self, key: &u64) -> bool {
        if self.bits.is_empty() {
            return false;
        }
        let (w, m) = Self::slot(*key);
        self.bits[w] & m != 0
    }
}

/// What a window seen in the sample of texts counts for, against one phrase
/// per window shared (see [`RunIndex::from_normalized_avoiding`]).
const COMMON_COST: usize = 1 << 16;

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
    fn add(&mut self, pat: &[u8], id: u32, keys: &mut Vec<u64>, common: &Seen) {
        let last = pat.len() - self.width + 1 - self.stride;
        let step = (last / 15).max(1);
        let mut best = (usize::MAX, 0usize);
        let mut first = 0;
        loop {
            // A window seen in the sample of texts would be probed everywhere: worse than any sharing.
            let used: usize = (first..first + self.stride)
                .map(|o| {
                    let k = self.key(pat, o);
                    self.cands.get(&k).map_or(0, |c| c.list.len()) + if common.contains(&k) { COMMON_COST } else { 0 }
                })
                .sum();
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

    /// Count every window's phrases as not found, and fill the Bloom filter.
    fn finish(&mut self) {
        for c in self.cands.values_mut() {
            *c.live.get_mut() = c.list.len() as u32;
        }
        self.fill_filter();
    }

    /// Size the Bloom filter for the windows that still have a phrase not found
    /// (about 32 bits per window, at most 2^24 bits) and fill it; no filter (the
    /// window is not probed at all) once every phrase behind it is found.
    fn fill_filter(&mut self) {
        let live: Vec<u64> = self.cands.iter().filter(|(_, c)| c.live.load(Ordering::Relaxed) > 0).map(|(k, _)| *k).collect();
        if live.is_empty() {
            self.bits = Vec::new();
            self.shift = 64;
            return;
        }
        let words = (live.len() / 2).next_power_of_two().clamp(1024, 1 << 18);
        self.shift = 64 - words.trailing_zeros();
        self.bits = vec![0u64; words];
        for k in live {
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
        Self::from_normalized_avoiding(phrases, &[] as &[&[u8]])
    }

    /// [`RunIndex::from_normalized`], choosing each phrase's windows among
    /// those absent from `sample` (a few normalised texts of the run) where it
    /// can: a window frequent in the texts (a common word) passes the filter
    /// wherever it occurs, for as long as its phrase is not found.
    pub fn from_normalized_avoiding<S: AsRef<str>, T: AsRef<[u8]>>(phrases: &[S], sample: &[T]) -> Result<Self> {
        Self::from_normalized_with(phrases, &Seen::of(sample))
    }

    /// [`RunIndex::from_normalized_avoiding`] with the sample's windows already collected.
    pub(super) fn from_normalized_with<S: AsRef<str>>(phrases: &[S], common: &Seen) -> Result<Self> {
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
        let mut w8s2 = Window::new(8, 2);
        let mut w8 = Window::new(8, 1);
        let mut w4 = Window::new(4, 1);
        let mut short_pats: Vec<&[u8]> = Vec::new();
        let mut short_ids = Vec::new();
        let mut keys = Vec::new();
        let mut key_starts = Vec::with_capacity(n + 1);
        key_starts.push(0);
        for id in 0..n {
            let pat = &data[starts[id]..starts[id + 1]];
            if pat.len() >= 19 {
                w8s8.add(pat, id as u32, &mut keys, common);
            } else if pat.len() >= 15 {
                w8s4.add(pat, id as u32, &mut keys, common);
            } else if pat.len() >= 13 {
                w8s2.add(pat, id as u32, &mut keys, common);
            } else if pat.len() >= 8 {
                w8.add(pat, id as u32, &mut keys, common);
            } else if pat.len() >= 4 {
                w4.add(pat, id as u32, &mut keys, common);
            } else {
                short_pats.push(pat);
                short_ids.push(id as u32);
            }
            key_starts.push(keys.len());
        }
        w8s8.finish();
        w8s4.finish();
        w8s2.finish();
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
            w8s2,
            w8,
            w4,
            short,
            found_at_fill: 0,
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
                19.. => &self.w8s8,
                15..=18 => &self.w8s4,
                13..=14 => &self.w8s2,
                8..=12 => &self.w8,
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

    /// Between scans (no scan may run meanwhile, hence `&mut`): when many
    /// phrases were found since the filters were last filled, fill them again
    /// with the windows of the phrases still to find. Windows of found phrases
    /// otherwise keep passing the filter and cost a lookup each; where the
    /// phrases share the texts' vocabulary, that is most text positions.
    pub fn refresh(&mut self) {
        let found = self.found.len() - self.remaining.load(Ordering::Relaxed);
        let left_at_fill = self.found.len() - self.found_at_fill;
        if found - self.found_at_fill < (left_at_fill / 8).max(1) {
            return;
        }
        self.refill();
    }

    /// Fill the filters again with the windows of the phrases still to find.
    fn refill(&mut self) {
        self.found_at_fill = self.found.len() - self.remaining.load(Ordering::Relaxed);
        for w in [&mut self.w8s8, &mut self.w8s4, &mut self.w8s2, &mut self.w8, &mut self.w4] {
            if !w.bits.is_empty() {
                w.fill_filter();
            }
        }
    }

    /// Every phrase has been found: further texts cannot change the answer.
    pub fn all_found(&self) -> bool {
        self.remaining.load(Ordering::Relaxed) == 0
    }

    /// Record input phrase `i` (an index into the phrases given to
    /// [`RunIndex::from_normalized`]) as found, e.g. because its own case's
    /// chunks contain it.
    pub fn mark_found(&self, i: usize) {
        let id = self.phrase_ids[i];
        if id != u32::MAX {
            self.mark(id);
        }
    }

    /// Record the phrases occurring in `text` (a normalised text).
    pub fn scan(&self, text: &[u8]) {
        if self.remaining.load(Ordering::Relaxed) == 0 {
            return;
        }
        for w in [&self.w8s8, &self.w8s4, &self.w8s2, &self.w8] {
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
