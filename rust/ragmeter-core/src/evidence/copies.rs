//! Which texts of a column are later copies of an earlier one (runs retrieve
//! the same chunks for many questions).

use rayon::prelude::*;

use super::batch::Strings;

/// Per text of `texts[range]`: `true` unless an earlier text of the range is
/// byte-equal to it. Exact: texts are grouped by a key sampled from their
/// bytes and compared in full within a group. A group compares each text
/// with at most [`MAX_SHAPES`] distinct earlier texts; a text that differs from
/// all of them counts as a first copy (probed again: never wrong, only slower).
pub fn first_copies<S: Strings + ?Sized>(texts: &S, range: std::ops::Range<usize>) -> Vec<bool> {
    let start = range.start;
    let mut keyed: Vec<(u64, u32)> = range
        .into_par_iter()
        .with_min_len(4096)
        .map(|i| (sample_key(texts.get(i).as_bytes()), (i - start) as u32))
        .collect();
    // Equal keys together, each group in text order (its first text first).
    keyed.par_sort_unstable();
    let mut first = vec![true; keyed.len()];
    let mut shapes: Vec<u32> = Vec::with_capacity(MAX_SHAPES);
    let mut g = 0;
    while g < keyed.len() {
        let mut e = g + 1;
        while e < keyed.len() && keyed[e].0 == keyed[g].0 {
            e += 1;
        }
        if e - g > 1 {
            shapes.clear();
            for &(_, i) in &keyed[g..e] {
                let text = texts.get(start + i as usize);
                if shapes.iter().any(|&s| texts.get(start + s as usize) == text) {
                    first[i as usize] = false;
                } else if shapes.len() < MAX_SHAPES {
                    shapes.push(i);
                }
            }
        }
        g = e;
    }
    first
}

/// Distinct texts of one key a group compares against (see [`first_copies`]).
pub const MAX_SHAPES: usize = 8;

/// The length and 16 eight-byte words spread over the text (all of it when
/// shorter than 8 bytes): a few nanoseconds per text whatever its length.
pub(super) fn sample_key(t: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (t.len() as u64).wrapping_mul(K);
    if t.len() < 8 {
        let mut w = [0u8; 8];
        w[..t.len()].copy_from_slice(t);
        return (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    let last = t.len() - 8;
    for j in 0..16 {
        let at = last * j / 15;
        let w = u64::from_le_bytes(t[at..at + 8].try_into().expect("8 bytes"));
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    h
}
