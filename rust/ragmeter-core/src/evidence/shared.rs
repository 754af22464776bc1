//! One normalisation per distinct chunk text of a block of cases: runs
//! retrieve the same chunks for many questions, and a copy of a text has the
//! normal forms of its first copy.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use rayon::prelude::*;
use rustc_hash::FxHashSet;

use super::batch::Strings;
use super::copies::{content_hash, FirstByHash};
use super::normalize::Normalizer;

/// The normal forms of one text: as normalised, and without its line-break
/// hyphens when it has some (see the module docs of `evidence`).
pub(super) struct Norm {
    pub(super) out: Vec<u8>,
    pub(super) dehyphenated: Option<Vec<u8>>,
}

impl Norm {
    /// The normal forms `norm` holds after a run.
    pub(super) fn of_run(norm: &Normalizer) -> Norm {
        let dehyphenated = norm.has_soft_hyphens().then(|| {
            let mut buf = Vec::new();
            norm.dehyphenated_into(&mut buf);
            buf
        });
        Norm { out: norm.out.clone(), dehyphenated }
    }
}

/// Texts `range` of a column grouped into byte-equal copies, each group with
/// one slot for its normal forms, filled by the first thread that needs them.
pub(super) struct SharedNorms {
    start: usize,
    /// Per text of the range: its group's slot, or [`OWN`].
    slot_of: Vec<u32>,
    slots: Vec<Slot>,
}

/// A group's normal forms, and whether one of its texts was claimed (see
/// [`SharedNorms::claim`]).
#[derive(Default)]
struct Slot {
    norm: OnceLock<Norm>,
    claimed: AtomicBool,
}

/// A text that is no byte-equal copy of its group's first text, though it has
/// its hash: normalised where it is used.
const OWN: u32 = u32::MAX;

/// Above this share of distinct texts, grouping saves less than it costs
/// (the slots keep every normal form of the block alive).
const MAX_DISTINCT: f64 = 0.75;

/// Texts hashed to tell whether a block is worth grouping.
const SAMPLE: usize = 4096;

/// Below this share of non-ASCII bytes, texts are normalised about as fast
/// as they are hashed and compared (ASCII sixteen bytes at a time: 3 GB/s
/// per core on `bench_score.py`'s ascii texts, where grouping them made the
/// match 8% slower): grouping them cannot pay.
const MIN_NON_ASCII: f64 = 0.125;

/// Texts read to tell whether a block is mostly ASCII.
const ASCII_SAMPLE: usize = 256;

impl SharedNorms {
    /// Group texts `range` of `texts`; `None` when more than [`MAX_DISTINCT`]
    /// of them are, or look from a sample, distinct (normalise and probe them
    /// one by one: hashing every text to find the few copies would cost more
    /// than probing those again), or when they are mostly ASCII (see
    /// [`MIN_NON_ASCII`]) and `probed` is false. `probed`: the texts will also
    /// probe a run-wide index, and only the first copy of a group does.
    pub(super) fn of<S: Strings + ?Sized>(texts: &S, range: Range<usize>, probed: bool) -> Option<Self> {
        Self::with_hash(texts, range, probed, content_hash)
    }

    /// [`Self::of`] with another hash function (tests: one under which texts collide).
    pub(super) fn with_hash<S: Strings + ?Sized>(texts: &S, range: Range<usize>, probed: bool, hash: fn(&[u8]) -> u64) -> Option<Self> {
        // Probing a copy again costs more than finding it (hashing and comparing every text), and a copy found is
        // not normalised again: 955 against 803 MB/s per core with the check on bench_score.py's ascii texts
        // (benches/RESULTS_score.md, 2026-12-04).
        if let Some((ids, values)) = texts.value_ids() {
            return Self::by_value(&ids[range.clone()], values, range.start);
        }
        if !probed && mostly_ascii(texts, range.clone()) {
            return None;
        }
        Self::grouped(texts, range, hash)
    }

    /// Texts of a dictionary-encoded column grouped by their value index
    /// (`ids`, of `values` values; the texts start at `start`): grouping then
    /// costs a pass over the indices, so it is done whatever the text, unless
    /// more than [`MAX_DISTINCT`] of the texts are distinct.
    fn by_value(ids: &[u32], values: usize, start: usize) -> Option<Self> {
        let mut group_of = vec![OWN; values];
        let mut groups = 0u32;
        let slot_of: Vec<u32> = ids
            .iter()
            .map(|&id| {
                let g = &mut group_of[id as usize];
                if *g == OWN {
                    *g = groups;
                    groups += 1;
                }
                *g
            })
            .collect();
        if groups as f64 > MAX_DISTINCT * ids.len() as f64 {
            return None;
        }
        Some(SharedNorms { start, slot_of, slots: (0..groups).map(|_| Slot::default()).collect() })
    }

    /// Group texts `range` unless more than [`MAX_DISTINCT`] of them are, or
    /// look from a sample, distinct.
    fn grouped<S: Strings + ?Sized>(texts: &S, range: Range<usize>, hash: fn(&[u8]) -> u64) -> Option<Self> {
        let n = range.len();
        if !looks_repeated(texts, range.clone(), hash) {
            return None;
        }
        let first = FirstByHash::new();
        // One pass: a text is read from memory once, hashed and compared with its group's first text.
        let slot_of: Vec<u32> = range
            .clone()
            .into_par_iter()
            .with_min_len(1024)
            .map(|k| {
                let text = texts.get(k).as_bytes();
                let (leader, group) = first.first(hash(text), k);
                if leader == k || texts.get(leader).as_bytes() == text {
                    group
                } else {
                    OWN
                }
            })
            .collect();
        let groups = first.groups();
        if groups as f64 > MAX_DISTINCT * n as f64 {
            return None;
        }
        Some(SharedNorms { start: range.start, slot_of, slots: (0..groups).map(|_| Slot::default()).collect() })
    }

    /// The normal forms of text `k` (within the grouped range), normalised
    /// with `norm` if no copy was yet; `None` for a text of its own (then
    /// normalise it where it is used).
    pub(super) fn get<S: Strings + ?Sized>(&self, texts: &S, k: usize, norm: &mut Normalizer) -> Option<&Norm> {
        let slot = self.slot_of[k - self.start];
        if slot == OWN {
            return None;
        }
        Some(self.slots[slot as usize].norm.get_or_init(|| {
            norm.run(texts.get(k));
            Norm::of_run(norm)
        }))
    }

    /// Is text `k` the first of its group asked about? `None` for a text of
    /// its own. The run-wide index is probed with the first copy of a text
    /// only: a copy cannot hold a phrase the first did not.
    pub(super) fn claim(&self, k: usize) -> Option<bool> {
        let slot = self.slot_of[k - self.start];
        (slot != OWN).then(|| !self.slots[slot as usize].claimed.swap(true, Ordering::Relaxed))
    }

    /// Number of groups (distinct texts, but for texts of their own).
    #[cfg(test)]
    pub(super) fn groups(&self) -> usize {
        self.slots.len()
    }

    /// Is text `k` normalised where it is used (no copy of its group's first text)?
    #[cfg(test)]
    pub(super) fn is_own(&self, k: usize) -> bool {
        self.slot_of[k - self.start] == OWN
    }
}

/// Are texts `range` mostly ASCII (less than [`MIN_NON_ASCII`] of the bytes
/// of a sample of [`ASCII_SAMPLE`] spread over them)?
fn mostly_ascii<S: Strings + ?Sized>(texts: &S, range: Range<usize>) -> bool {
    let n = range.len();
    let s = ASCII_SAMPLE.min(n);
    let (mut bytes, mut non_ascii) = (0usize, 0usize);
    for j in 0..s {
        let t = texts.get(range.start + j * n / s).as_bytes();
        bytes += t.len();
        non_ascii += t.iter().filter(|&&b| b >= 0x80).count();
    }
    (non_ascii as f64) < MIN_NON_ASCII * bytes as f64
}

/// Are texts `range` likely to hold at most [`MAX_DISTINCT`] distinct ones?
/// A sample of [`SAMPLE`] spread over them, where `d` texts repeat earlier
/// ones, suggests about `SAMPLE² / 2d` distinct texts (the birthday bound,
/// for texts drawn alike from a pool); a sample of all texts tells exactly.
fn looks_repeated<S: Strings + ?Sized>(texts: &S, range: Range<usize>, hash: fn(&[u8]) -> u64) -> bool {
    let n = range.len();
    let s = SAMPLE.min(n);
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    let repeats = (0..s).filter(|j| !seen.insert(hash(texts.get(range.start + j * n / s).as_bytes()))).count();
    if s == n {
        return (n - repeats) as f64 <= MAX_DISTINCT * n as f64;
    }
    repeats > 0 && (s * s) as f64 / (2 * repeats) as f64 <= MAX_DISTINCT * n as f64
}
