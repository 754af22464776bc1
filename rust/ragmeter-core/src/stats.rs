//! Seeded bootstrap of means for many columns sharing the same resamples.
//!
//! The kernel behind `ragmeter.stats.bootstrap_means` (and so behind
//! `ragmeter compare`'s paired bootstrap, where the columns are per-case
//! differences `candidate - baseline`).
//!
//! * **Resampling.** Each resample draws `n` case indices uniformly with
//!   replacement (xoshiro256++, unbiased Lemire reduction on 32-bit halves) and
//!   counts them in a per-case histogram. Resamples come in blocks of
//!   [`BLOCK`]; block `b` has its own generator seeded from `(seed, b)`
//!   through splitmix64, so the result is the same for any number of threads.
//! * **Reduction.** A resample's statistic for column `j` is
//!   `sum(count * value) / sum(count * scored)` over the scored cases: NaN is
//!   an unscored case, left out of both sums (never counted as 0), and a
//!   resample where nothing is scored gives NaN. Values are centred first (on
//!   the column's first scored value), so constant columns are exact.
//!   The sums are dot products of the count histogram with a column-major
//!   design (centred values, then the distinct scored masks), tiled so a
//!   design tile stays in cache for every resample of a block, multiplied in
//!   f32 within a tile (register-blocked, 8 lanes) and accumulated in f64
//!   across tiles, always in the same order: bit-identical for a given seed on
//!   every run, thread count and CPU (no fused multiply-add).
//! * **Groups.** Cases carry a group code; per-group statistics come from the
//!   very same resamples as the overall one (a group's size varies between
//!   resamples, as it would between samples).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{Error, Result};

/// Resamples per seed block (and per parallel task).
pub const BLOCK: usize = 16;
/// Cases per cache tile of the reduction.
const TILE: usize = 1024;
/// Accumulator lanes of a dot product (fixed: decides the summation order).
const LANES: usize = 8;

/// splitmix64 (Steele, Lea, Flood 2014): seeds the block generators.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }
}

#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256++ (Blackman, Vigna 2019).
#[derive(Clone, Debug)]
pub struct Xoshiro256pp {
    s: [u64; 4],
}

impl Xoshiro256pp {
    /// State from four splitmix64 outputs (never all zero).
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut sm = SplitMix64(seed);
        let mut s = [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()];
        if s.iter().all(|&x| x == 0) {
            s[0] = 1;
        }
        Xoshiro256pp { s }
    }

    /// The generator of resample block `block` under `seed`.
    pub fn for_block(seed: u64, block: u64) -> Self {
        Self::seed_from_u64(mix64(seed ^ 0x6A09_E667_F3BC_C909) ^ mix64(block.wrapping_add(0xBB67_AE85_84CA_A73B)))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
}

/// Fill `counts` (length `n`) with the histogram of `n` uniform draws from `0..n`.
///
/// Each 64-bit output gives two 32-bit draws, mapped to `0..n` by Lemire's
/// multiply-shift with rejection (exactly uniform). Counts are `u16` (half the
/// cache footprint of `u32`: 1.4x faster draws at 100,000 cases); returns
/// `false` if a count overflowed, which needs one case drawn 65,536 times in
/// one resample (probability below 10^-280000; reported as an error, never
/// used). The histogram is zeroed right before the draws, which also brings
/// it into cache (zeroing it earlier measured 1.7x slower).
pub fn fill_counts(rng: &mut Xoshiro256pp, counts: &mut [u16]) -> bool {
    let n = counts.len();
    counts.fill(0);
    if n == 0 {
        return true;
    }
    let n32 = n as u32;
    let n64 = n as u64;
    let threshold = n32.wrapping_neg() % n32; // (2^32 - n) mod n
    let mut remaining = n;
    let mut wrapped = false;
    while remaining > 0 {
        let x = rng.next_u64();
        let m = (x >> 32) * n64;
        if (m as u32) >= threshold {
            let c = &mut counts[(m >> 32) as usize];
            *c = c.wrapping_add(1);
            wrapped |= *c == 0;
            remaining -= 1;
            if remaining == 0 {
                break;
            }
        }
        let m = (x & 0xFFFF_FFFF) * n64;
        if (m as u32) >= threshold {
            let c = &mut counts[(m >> 32) as usize];
            *c = c.wrapping_add(1);
            wrapped |= *c == 0;
            remaining -= 1;
        }
    }
    !wrapped
}

const OVERFLOW: &str = "bootstrap: a resample drew one case 65,536 times (count overflow)";

/// The per-case counts of every resample, `n_resamples x n` row-major (for tests:
/// exactly the counts [`bootstrap_means`] uses for the same `seed`, over the
/// cases in stable group order, i.e. in input order when there are no groups).
pub fn resample_counts(n: usize, n_resamples: usize, seed: u64) -> Result<Vec<i32>> {
    check_n(n)?;
    let total = check_size(n_resamples, n, &format!("{n} counts"))?;
    let mut out = vec![0i32; total];
    if n == 0 {
        return Ok(out);
    }
    let mut row16 = vec![0u16; n];
    for (b, block) in out.chunks_mut(BLOCK * n).enumerate() {
        let mut rng = Xoshiro256pp::for_block(seed, b as u64);
        for row in block.chunks_mut(n) {
            if !fill_counts(&mut rng, &mut row16) {
                return Err(Error::input(OVERFLOW));
            }
            for (o, c) in row.iter_mut().zip(&row16) {
                *o = *c as i32;
            }
        }
    }
    Ok(out)
}

/// Most cases the kernel takes (f32 partial sums of counts stay exact below 2^24).
pub const MAX_CASES: usize = (1 << 24) - 1;

fn check_n(n: usize) -> Result<()> {
    if n > MAX_CASES {
        return Err(Error::input(format!("bootstrap: {n} cases is more than the kernel supports ({MAX_CASES})")));
    }
    Ok(())
}

/// Most numbers the kernel returns (1 GiB of f64; its working sums take up to twice
/// that): `n_resamples` is the caller's, and 10^11 resamples was an allocation of
/// terabytes (an abort), 2^62 a 'capacity overflow' panic.
pub const MAX_VALUES: usize = 1 << 27;

/// Largest magnitude of a value: a tile's f32 sum of residuals (at most MAX_CASES x twice
/// this) stays below f32::MAX (3.4e38).
pub const MAX_VALUE: f64 = 1e30;

/// `n_resamples x per_resample` numbers, refused above [`MAX_VALUES`] (naming `n_resamples`).
fn check_size(n_resamples: usize, per_resample: usize, what: &str) -> Result<usize> {
    match n_resamples.checked_mul(per_resample) {
        Some(total) if total <= MAX_VALUES => Ok(total),
        _ => Err(Error::input(format!(
            "bootstrap: n_resamples = {n_resamples} is too many: {n_resamples} resamples x {what} each is more than the \
             {MAX_VALUES} numbers (1 GiB) the kernel returns; use fewer resamples"
        ))),
    }
}

/// Register block of the reduction: `R` resamples x `C` design columns over one
/// tile, `LANES` f32 accumulators each (no FMA, fixed order: the same bits on
/// every CPU). Returns the per-(resample, column) tile sums.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
fn micro<const R: usize, const C: usize>(cf: &[f32], stride: usize, rows: usize, d: &[f32], n: usize, col0: usize, t: usize, len: usize) -> [[f32; C]; R] {
    let mut acc = [[[0.0f32; LANES]; C]; R];
    let full = len - len % LANES;
    let mut j = 0;
    while j < full {
        let mut cv = [[0.0f32; LANES]; R];
        for (r, v) in cv.iter_mut().enumerate() {
            v.copy_from_slice(&cf[(rows + r) * stride + j..(rows + r) * stride + j + LANES]);
        }
        for c in 0..C {
            let base = (col0 + c) * n + t + j;
            let dv: [f32; LANES] = d[base..base + LANES].try_into().unwrap();
            for r in 0..R {
                for l in 0..LANES {
                    acc[r][c][l] += cv[r][l] * dv[l];
                }
            }
        }
        j += LANES;
    }
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            let a = &acc[r][c];
            let mut tail = 0.0f32;
            for jj in full..len {
                tail += cf[(rows + r) * stride + jj] * d[(col0 + c) * n + t + jj];
            }
            out[r][c] = (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) + tail;
        }
    }
    out
}

/// `out[(r * groups + g) * width + col] += counts[r] . design[col]` over group g's rows.
///
/// Counts and design are multiplied in f32 per tile (counts are small integers,
/// exact; the design holds centred values, ~7 significant digits of their
/// spread) and the tile sums are accumulated in f64. Scored-count columns (0/1)
/// are exact: every partial sum is an integer below 2^24 ([`MAX_CASES`]).
#[inline(always)]
fn reduce_generic(counts: &[u16], n: usize, design: &[f32], width: usize, bounds: &[(usize, usize)], cf: &mut [f32], out: &mut [f64]) {
    let groups = bounds.len();
    let c = counts.len() / n.max(1);
    for (g, &(s, e)) in bounds.iter().enumerate() {
        let mut t = s;
        while t < e {
            let len = (e - t).min(TILE);
            for r in 0..c {
                for (dst, src) in cf[r * TILE..r * TILE + len].iter_mut().zip(&counts[r * n + t..r * n + t + len]) {
                    *dst = *src as f32;
                }
            }
            let mut r0 = 0;
            while r0 < c {
                let rr = (c - r0).min(4);
                let mut c0 = 0;
                while c0 < width {
                    let cc = (width - c0).min(2);
                    macro_rules! run {
                        ($r:literal, $c:literal) => {{
                            let sums = micro::<$r, $c>(cf, TILE, r0, design, n, c0, t, len);
                            for (ri, row) in sums.iter().enumerate() {
                                let o = ((r0 + ri) * groups + g) * width + c0;
                                for (ci, v) in row.iter().enumerate() {
                                    out[o + ci] += *v as f64;
                                }
                            }
                        }};
                    }
                    match (rr, cc) {
                        (4, 2) => run!(4, 2),
                        (4, _) => run!(4, 1),
                        (3, 2) => run!(3, 2),
                        (3, _) => run!(3, 1),
                        (2, 2) => run!(2, 2),
                        (2, _) => run!(2, 1),
                        (_, 2) => run!(1, 2),
                        _ => run!(1, 1),
                    }
                    c0 += cc;
                }
                r0 += rr;
            }
            t += len;
        }
    }
}

/// The same code compiled for AVX2 (no FMA: separate multiply and add round as
/// the baseline build does, so results do not depend on the CPU).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn reduce_avx2(counts: &[u16], n: usize, design: &[f32], width: usize, bounds: &[(usize, usize)], cf: &mut [f32], out: &mut [f64]) {
    reduce_generic(counts, n, design, width, bounds, cf, out)
}

fn reduce(counts: &[u16], n: usize, design: &[f32], width: usize, bounds: &[(usize, usize)], cf: &mut [f32], out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { reduce_avx2(counts, n, design, width, bounds, cf, out) };
            return;
        }
    }
    reduce_generic(counts, n, design, width, bounds, cf, out)
}

/// Resampled means of every column of `values` (`n x k` row-major, NaN =
/// unscored), overall and per group.
///
/// `codes[i] < n_groups` is case `i`'s group (all zeros and `n_groups = 1`
/// for no groups). Returns `n_resamples x (1 + n_groups) x k` row-major: slot 0
/// is the whole set, slot `1 + g` group `g`; NaN where a resample has no
/// scored case in that slot. `threads = None` uses rayon's global pool; the
/// result does not depend on the number of threads.
#[allow(clippy::too_many_arguments)]
pub fn bootstrap_means(
    values: &[f64],
    n: usize,
    k: usize,
    codes: &[u32],
    n_groups: usize,
    n_resamples: usize,
    seed: u64,
    threads: Option<usize>,
) -> Result<Vec<f64>> {
    check_n(n)?;
    if values.len() != n * k {
        return Err(Error::input(format!("bootstrap: values has {} entries, expected {n} x {k}", values.len())));
    }
    if codes.len() != n {
        return Err(Error::input(format!("bootstrap: {} group codes for {n} cases", codes.len())));
    }
    if n_groups == 0 {
        return Err(Error::input("bootstrap: n_groups must be at least 1"));
    }
    if let Some(&bad) = codes.iter().find(|&&c| c as usize >= n_groups) {
        return Err(Error::input(format!("bootstrap: group code {bad} is not below n_groups = {n_groups}")));
    }
    // Values are summed in f32 as residuals from a centre: an infinity made every resample
    // that did not draw its case NaN (0 x inf), and a residual beyond f32 (1e300) became
    // inf, both silently. NaN stays "unscored".
    if let Some(i) = values.iter().position(|v| v.is_infinite() || v.abs() > MAX_VALUE) {
        return Err(Error::input(format!(
            "bootstrap: value {:e} (case {}, column {}) is beyond what the kernel sums (finite, |x| <= {MAX_VALUE:e})",
            values[i],
            i / k.max(1),
            i % k.max(1)
        )));
    }
    let slots = n_groups.saturating_add(1);
    let per_resample = slots.saturating_mul(k);
    check_size(n_resamples, per_resample, &format!("{per_resample} means"))?;
    let mut result = vec![f64::NAN; n_resamples * slots * k];
    if n == 0 || k == 0 || n_resamples == 0 {
        return Ok(result);
    }

    // rows sorted by group (stable): each group is one contiguous range
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| codes[i]);
    let mut bounds = Vec::with_capacity(n_groups);
    let mut start = 0;
    for g in 0..n_groups as u32 {
        let mut end = start;
        while end < n && codes[order[end]] == g {
            end += 1;
        }
        bounds.push((start, end));
        start = end;
    }

    // centred values, then the distinct scored masks, column-major
    // centre[g * k + j]: each group's column is centred on its own first scored value, so
    // that a group's residuals stay small (f32 keeps its digits) however far another
    // group's values lie, and a constant group has zero residuals (exact means)
    let mut centre = vec![0.0f64; n_groups * k];
    let mut masks: Vec<Vec<bool>> = Vec::new();
    let mut mask_of = vec![0usize; k];
    for j in 0..k {
        let mask: Vec<bool> = order.iter().map(|&i| !values[i * k + j].is_nan()).collect();
        for (g, &(start, end)) in bounds.iter().enumerate() {
            centre[g * k + j] =
                order[start..end].iter().map(|&i| values[i * k + j]).find(|v| !v.is_nan()).unwrap_or(0.0);
        }
        mask_of[j] = match masks.iter().position(|m| *m == mask) {
            Some(p) => p,
            None => {
                masks.push(mask);
                masks.len() - 1
            }
        };
    }
    let width = k + masks.len();
    let mut design = vec![0.0f32; width * n];
    for j in 0..k {
        let col = &mut design[j * n..(j + 1) * n];
        for (pos, &i) in order.iter().enumerate() {
            let v = values[i * k + j];
            col[pos] = if v.is_nan() { 0.0 } else { (v - centre[codes[i] as usize * k + j]) as f32 };
        }
    }
    for (m, mask) in masks.iter().enumerate() {
        let col = &mut design[(k + m) * n..(k + m + 1) * n];
        for (pos, &s) in mask.iter().enumerate() {
            col[pos] = if s { 1.0 } else { 0.0 };
        }
    }

    // resampled sums per (resample, group, design column), in blocks of BLOCK resamples
    let n_blocks = n_resamples.div_ceil(BLOCK);
    let mut sums = vec![0.0f64; n_resamples * n_groups * width];
    let overflow = AtomicBool::new(false);
    let run = |sums: &mut Vec<f64>| {
        sums.par_chunks_mut(BLOCK * n_groups * width).enumerate().for_each_init(
            || (vec![0u16; BLOCK * n], vec![0.0f32; BLOCK * TILE]),
            |(counts, cf), (b, out)| {
                let c = out.len() / (n_groups * width);
                let mut rng = Xoshiro256pp::for_block(seed, b as u64);
                for row in counts[..c * n].chunks_mut(n) {
                    if !fill_counts(&mut rng, row) {
                        overflow.store(true, Ordering::Relaxed);
                    }
                }
                reduce(&counts[..c * n], n, &design, width, &bounds, cf, out);
            },
        );
    };
    debug_assert_eq!(n_blocks, sums.len().div_ceil(BLOCK * n_groups * width));
    match threads {
        Some(t) if t > 0 => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .map_err(|e| Error::input(format!("bootstrap: cannot start {t} threads: {e}")))?;
            pool.install(|| run(&mut sums));
        }
        _ => run(&mut sums),
    }
    if overflow.load(Ordering::Relaxed) {
        return Err(Error::input(OVERFLOW));
    }

    // a group's mean: its centre + (sum of its residuals) / (its scored count); the overall
    // mean adds every group's centre back, weighted by that group's scored count
    // (relative to the column's first scored value: a column constant over all groups comes out exact)
    let base: Vec<f64> =
        (0..k).map(|j| order.iter().map(|&i| values[i * k + j]).find(|v| !v.is_nan()).unwrap_or(0.0)).collect();
    let mut num = vec![0.0f64; k];
    let mut den = vec![0.0f64; k];
    for r in 0..n_resamples {
        num.fill(0.0);
        den.fill(0.0);
        for g in 0..n_groups {
            let s = &sums[(r * n_groups + g) * width..(r * n_groups + g + 1) * width];
            let out = &mut result[(r * slots + 1 + g) * k..(r * slots + 2 + g) * k];
            for j in 0..k {
                let d = s[k + mask_of[j]];
                let c = centre[g * k + j];
                if d > 0.0 {
                    // (no scored case drawn: the slot stays NaN, as `result` was filled)
                    out[j] = c + s[j] / d;
                    num[j] += (c - base[j]) * d + s[j];
                    den[j] += d;
                }
            }
        }
        let out = &mut result[r * slots * k..(r * slots + 1) * k];
        for j in (0..k).filter(|&j| den[j] > 0.0) {
            out[j] = base[j] + num[j] / den[j];
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain reference: the same counts, a direct ratio per resample.
    fn reference(values: &[f64], n: usize, k: usize, codes: &[u32], n_groups: usize, b: usize, seed: u64) -> Vec<f64> {
        let counts = resample_counts(n, b, seed).unwrap();
        // counts are over the cases in stable group order
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| codes[i]);
        let slots = 1 + n_groups;
        let mut out = vec![f64::NAN; b * slots * k];
        for r in 0..b {
            for slot in 0..slots {
                for j in 0..k {
                    let (mut num, mut den) = (0.0, 0.0);
                    for (pos, &i) in order.iter().enumerate() {
                        if slot > 0 && codes[i] as usize != slot - 1 {
                            continue;
                        }
                        let v = values[i * k + j];
                        if !v.is_nan() {
                            num += counts[r * n + pos] as f64 * v;
                            den += counts[r * n + pos] as f64;
                        }
                    }
                    if den > 0.0 {
                        out[(r * slots + slot) * k + j] = num / den;
                    }
                }
            }
        }
        out
    }

    fn data(n: usize, k: usize) -> (Vec<f64>, Vec<u32>) {
        let mut rng = Xoshiro256pp::seed_from_u64(99);
        let mut v = Vec::with_capacity(n * k);
        for i in 0..n * k {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            v.push(if i % 7 == 3 { f64::NAN } else { u });
        }
        let codes = (0..n).map(|i| ((i * 7919) % 3) as u32).collect();
        (v, codes)
    }

    #[test]
    fn counts_draw_n_cases_per_resample() {
        let c = resample_counts(1000, 40, 5).unwrap();
        for row in c.chunks(1000) {
            assert_eq!(row.iter().map(|&x| x as i64).sum::<i64>(), 1000);
        }
        // on average one draw per case
        let mean = c.iter().map(|&x| x as f64).sum::<f64>() / c.len() as f64;
        assert!((mean - 1.0).abs() < 1e-12);
        assert_ne!(resample_counts(1000, 1, 5).unwrap(), resample_counts(1000, 1, 6).unwrap());
    }

    #[test]
    fn uniform_draws_are_uniform() {
        // 3 categories, many draws: chi-square well within bounds
        let mut rng = Xoshiro256pp::seed_from_u64(1);
        let mut total = [0i64; 3];
        for _ in 0..20000 {
            let mut c = [0u16; 3];
            assert!(fill_counts(&mut rng, &mut c));
            for (t, x) in total.iter_mut().zip(c) {
                *t += x as i64;
            }
        }
        let e = 20000.0;
        let chi: f64 = total.iter().map(|&x| (x as f64 - e).powi(2) / e).sum();
        assert!(chi < 13.8, "chi-square {chi} ({total:?})"); // p = 0.001 at 2 dof
    }

    #[test]
    fn kernel_matches_plain_reference_on_the_same_counts() {
        let (n, k, g) = (2500, 3, 3);
        let (v, codes) = data(n, k);
        let got = bootstrap_means(&v, n, k, &codes, g, 37, 11, Some(1)).unwrap();
        let want = reference(&v, n, k, &codes, g, 37, 11);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn same_seed_same_result_whatever_the_threads() {
        let (n, k) = (3000, 4);
        let (v, codes) = data(n, k);
        let a = bootstrap_means(&v, n, k, &codes, 3, 100, 42, Some(1)).unwrap();
        let b = bootstrap_means(&v, n, k, &codes, 3, 100, 42, Some(3)).unwrap();
        let c = bootstrap_means(&v, n, k, &codes, 3, 100, 42, None).unwrap();
        let d = bootstrap_means(&v, n, k, &codes, 3, 100, 43, None).unwrap();
        let bits = |x: &[f64]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
        assert_eq!(bits(&a), bits(&c));
        assert_ne!(bits(&a), bits(&d));
    }

    #[test]
    fn unscored_cases_are_left_out_and_constants_are_exact() {
        // column 0 constant 0.2 where scored; column 1 never scored
        let n = 500;
        let mut v = vec![0.0; n * 2];
        for i in 0..n {
            v[i * 2] = if i % 4 == 0 { f64::NAN } else { 0.2 };
            v[i * 2 + 1] = f64::NAN;
        }
        let codes = vec![0u32; n];
        let out = bootstrap_means(&v, n, 2, &codes, 1, 50, 1, None).unwrap();
        for r in 0..50 {
            for slot in 0..2 {
                assert_eq!(out[(r * 2 + slot) * 2], 0.2);
                assert!(out[(r * 2 + slot) * 2 + 1].is_nan());
            }
        }
    }

    #[test]
    fn a_group_keeps_its_digits_when_another_group_is_far_away() {
        // one case of group 0 at 10,000; nine cases of group 1 all 0.1 (f32 residuals around
        // a shared centre gave group 1 means of 0.0990-0.1008)
        let mut v = vec![1e4];
        v.extend([0.1; 9]);
        let codes: Vec<u32> = std::iter::once(0).chain([1; 9]).collect();
        let out = bootstrap_means(&v, 10, 1, &codes, 2, 200, 1, Some(1)).unwrap();
        let want = reference(&v, 10, 1, &codes, 2, 200, 1);
        for r in 0..200 {
            let group1 = out[r * 3 + 2];
            assert!(group1.is_nan() || group1 == 0.1, "resample {r}: {group1}");
            assert!(out[r * 3 + 1].is_nan() || out[r * 3 + 1] == 1e4);
            assert!((out[r * 3] - want[r * 3]).abs() <= 1e-9 * want[r * 3].abs(), "{} vs {}", out[r * 3], want[r * 3]);
        }
        // a column constant over all groups is exact in every slot
        let codes: Vec<u32> = (0..10).map(|i| i % 3).collect();
        let out = bootstrap_means(&[0.3; 10], 10, 1, &codes, 3, 50, 2, None).unwrap();
        assert!(out.iter().all(|&m| m.is_nan() || m == 0.3));
    }

    #[test]
    fn interval_brackets_mean_with_normal_width() {
        let n = 4000;
        let mut rng = Xoshiro256pp::seed_from_u64(3);
        let v: Vec<f64> = (0..n).map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64).collect();
        let codes = vec![0u32; n];
        let b = 4000;
        let out = bootstrap_means(&v, n, 1, &codes, 1, b, 9, None).unwrap();
        let mut m: Vec<f64> = (0..b).map(|r| out[r * 2]).collect();
        m.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let (lo, hi) = (m[(0.025 * b as f64) as usize], m[(0.975 * b as f64) as usize]);
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let se = sd / (n as f64).sqrt();
        assert!(lo < mean && mean < hi);
        assert!(((hi - lo) / (2.0 * 1.96 * se) - 1.0).abs() < 0.1, "width {} vs {}", hi - lo, 2.0 * 1.96 * se);
    }

    #[test]
    fn resample_counts_beyond_memory_are_refused_not_allocated() {
        // n_resamples is the caller's: 10^11 was terabytes (an abort), 2^62 overflowed the
        // size (a 'capacity overflow' panic); usize::MAX groups overflowed 1 + n_groups.
        for r in [100_000_000_000usize, 1 << 62, usize::MAX] {
            let err = bootstrap_means(&[0.1, 0.5, 0.9], 3, 1, &[0, 0, 0], 1, r, 1, None).unwrap_err().to_string();
            assert!(err.starts_with(&format!("bootstrap: n_resamples = {r} is too many")), "{err}");
            let err = resample_counts(1000, r, 1).unwrap_err().to_string();
            assert!(err.starts_with(&format!("bootstrap: n_resamples = {r} is too many")), "{err}");
        }
        let err = bootstrap_means(&[0.1, 0.5, 0.9], 3, 1, &[0, 0, 0], usize::MAX, 100, 1, None).unwrap_err().to_string();
        assert!(err.starts_with("bootstrap: n_resamples = 100 is too many"), "{err}");
        // Up to the limit it runs.
        assert_eq!(bootstrap_means(&[0.1, 0.5], 2, 1, &[0, 1], 2, 1000, 1, None).unwrap().len(), 3000);
    }

    #[test]
    fn infinite_or_huge_values_are_refused_not_summed_into_nan() {
        // [0.1, 0.5, 0.9, inf]: resamples without the last case came out NaN, the others inf;
        // 1e300 overflowed f32 the same way.
        for big in [f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e31] {
            let err = bootstrap_means(&[0.1, 0.5, 0.9, big], 4, 1, &[0; 4], 1, 100, 1, None).unwrap_err().to_string();
            assert!(err.starts_with(&format!("bootstrap: value {big:e} (case 3, column 0) is beyond what the kernel sums")), "{err}");
        }
        let err = bootstrap_means(&[0.1, 0.5, f64::INFINITY, 0.9], 2, 2, &[0; 2], 1, 100, 1, None).unwrap_err().to_string();
        assert_eq!(err, "bootstrap: value inf (case 1, column 0) is beyond what the kernel sums (finite, |x| <= 1e30)");
        // NaN is an unscored case; 3,000 values of +-1e30 sum within f32.
        let v: Vec<f64> = (0..3000).map(|i| if i % 3 == 0 { f64::NAN } else if i % 2 == 0 { 1e30 } else { -1e30 }).collect();
        let out = bootstrap_means(&v, 3000, 1, &[0; 3000], 1, 100, 1, None).unwrap();
        assert!(out.iter().all(|m| m.is_finite() && m.abs() <= 1e30), "{:?}", &out[..4]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(bootstrap_means(&[1.0], 1, 2, &[0], 1, 10, 1, None).is_err());
        assert!(bootstrap_means(&[1.0], 1, 1, &[1], 1, 10, 1, None).is_err());
        assert!(bootstrap_means(&[1.0], 1, 1, &[0, 0], 1, 10, 1, None).is_err());
        let empty = bootstrap_means(&[], 0, 1, &[], 1, 3, 1, None).unwrap();
        assert!(empty.len() == 6 && empty.iter().all(|x| x.is_nan()));
    }
}
