//! Rank-metric kernels on one ranked list.
//!
//! A ranked list is a slice of relevance grades, best rank first. A position is
//! *relevant* when its grade is `>= level` (trec_eval's `-l`, default 1); grades
//! below zero mean "not judged" and are never relevant. Every kernel here follows
//! trec_eval's definition (see `shared/conformance/trec_eval/NOTES.md`); where
//! other tools define a measure differently, the variant has its own name.

/// Number of relevant positions among the first `k` (all when `k` is `None`).
#[inline]
pub fn hits(grades: &[f64], level: f64, k: Option<usize>) -> usize {
    top(grades, k).iter().filter(|&&g| g >= level).count()
}

#[inline]
fn top(grades: &[f64], k: Option<usize>) -> &[f64] {
    match k {
        Some(k) if k < grades.len() => &grades[..k],
        _ => grades,
    }
}

/// Average precision with trec_eval's denominator: the number of relevant
/// items `num_rel` (retrieved or not). 0 when nothing relevant is retrieved.
/// With `k`, only ranks `<= k` contribute but the denominator stays `num_rel`
/// (trec_eval `map_cut`).
pub fn average_precision(grades: &[f64], level: f64, num_rel: usize, k: Option<usize>) -> f64 {
    let (sum, found) = precision_sum(top(grades, k), level);
    if found == 0 || num_rel == 0 {
        0.0
    } else {
        sum / num_rel as f64
    }
}

/// Average precision over the relevant items *retrieved* (ragas' context
/// precision). Exact: `[1, 1, 0]` gives 1.0. 0 when nothing relevant is retrieved.
pub fn average_precision_retrieved(grades: &[f64], level: f64, k: Option<usize>) -> f64 {
    let (sum, found) = precision_sum(top(grades, k), level);
    if found == 0 {
        0.0
    } else {
        sum / found as f64
    }
}

/// Sum of precision at each relevant rank, and the number of relevant ranks.
#[inline]
fn precision_sum(grades: &[f64], level: f64) -> (f64, usize) {
    let mut found = 0usize;
    let mut sum = 0.0;
    for (i, &g) in grades.iter().enumerate() {
        if g >= level {
            found += 1;
            sum += found as f64 / (i + 1) as f64;
        }
    }
    (sum, found)
}

/// 1-based rank of the first relevant position within the first `k`, if any.
#[inline]
pub fn first_relevant_rank(grades: &[f64], level: f64, k: Option<usize>) -> Option<usize> {
    top(grades, k).iter().position(|&g| g >= level).map(|i| i + 1)
}

/// Reciprocal rank of the first relevant position (within `k`), 0 if none.
pub fn reciprocal_rank(grades: &[f64], level: f64, k: Option<usize>) -> f64 {
    first_relevant_rank(grades, level, k).map_or(0.0, |r| 1.0 / r as f64)
}

/// Precision at `k`: relevant in the top `k` divided by `k`, always `k`, even
/// when fewer than `k` items were retrieved (trec_eval `P_k`).
pub fn precision_at(grades: &[f64], level: f64, k: usize) -> f64 {
    if k == 0 {
        return 0.0;
    }
    hits(grades, level, Some(k)) as f64 / k as f64
}

/// Precision over the retrieved list (`k` capped at the list length); the
/// set-based precision of trec_eval's `set_P` after `-M k`. 0 for an empty list.
pub fn precision_retrieved(grades: &[f64], level: f64, k: Option<usize>) -> f64 {
    let list = top(grades, k);
    if list.is_empty() {
        0.0
    } else {
        hits(list, level, None) as f64 / list.len() as f64
    }
}

/// Recall at `k`: relevant in the top `k` over `num_rel`; 0 when `num_rel` is 0.
pub fn recall_at(grades: &[f64], level: f64, num_rel: usize, k: Option<usize>) -> f64 {
    if num_rel == 0 {
        0.0
    } else {
        hits(grades, level, k) as f64 / num_rel as f64
    }
}

/// 1 when some relevant item is in the top `k` (trec_eval `success_k`, "hit").
pub fn success_at(grades: &[f64], level: f64, k: Option<usize>) -> f64 {
    if first_relevant_rank(grades, level, k).is_some() {
        1.0
    } else {
        0.0
    }
}

/// R-precision: precision after `num_rel` items (trec_eval `Rprec`).
pub fn r_precision(grades: &[f64], level: f64, num_rel: usize) -> f64 {
    let look = num_rel.min(grades.len());
    if look == 0 {
        return 0.0;
    }
    hits(grades, level, Some(look)) as f64 / num_rel as f64
}

/// F-measure with weight `beta` (1 = F1) from a precision and a recall; 0 when both are 0.
pub fn f_measure(precision: f64, recall: f64, beta: f64) -> f64 {
    let b2 = beta * beta;
    let denom = b2 * precision + recall;
    if denom <= 0.0 {
        0.0
    } else {
        (1.0 + b2) * precision * recall / denom
    }
}

/// How a grade becomes a gain in DCG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gain {
    /// The grade itself (trec_eval `ndcg`, `ndcg_cut`; Järvelin & Kekäläinen).
    Linear,
    /// `2^grade - 1` (Burges et al.; ranx `ndcg_burges`).
    Exponential,
}

impl Gain {
    #[inline]
    pub fn of(self, grade: f64) -> f64 {
        if grade <= 0.0 {
            return 0.0;
        }
        match self {
            Gain::Linear => grade,
            Gain::Exponential => grade.exp2() - 1.0,
        }
    }
}

/// log2 of an integer (NDCG's discount, asked for at every rank of every query):
/// the first ranks come from a table of the same `f64::log2` values, bit for bit.
#[inline]
pub(crate) fn rank_log2(rank: usize) -> f64 {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| (0..1024).map(|n| (n as f64).log2()).collect());
    table.get(rank).copied().unwrap_or_else(|| (rank as f64).log2())
}

/// Discounted cumulative gain of the first `k` positions (log2(rank + 1) discount).
pub fn dcg(grades: &[f64], k: Option<usize>, gain: Gain) -> f64 {
    let mut sum = 0.0;
    for (i, &g) in top(grades, k).iter().enumerate() {
        if g > 0.0 {
            sum += gain.of(g) / rank_log2(i + 2);
        }
    }
    sum
}

/// NDCG at `k`: DCG of the ranking over DCG of `ideal` (all judged grades of the
/// query, sorted in decreasing order), both cut at `k`. 0 when the ideal DCG is 0.
pub fn ndcg(grades: &[f64], ideal: &[f64], k: Option<usize>, gain: Gain) -> f64 {
    let ideal_dcg = dcg(ideal, k, gain);
    if ideal_dcg <= 0.0 {
        0.0
    } else {
        dcg(grades, k, gain) / ideal_dcg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(bits: &[u8]) -> Vec<f64> {
        bits.iter().map(|&b| b as f64).collect()
    }

    #[test]
    fn seed_examples_from_the_issue() {
        // [1,0,1]: AP over retrieved relevant = (1 + 2/3) / 2 = 0.8333; P = 2/3.
        let a = v(&[1, 0, 1]);
        assert!((average_precision_retrieved(&a, 1.0, None) - 5.0 / 6.0).abs() < 1e-15);
        assert!((precision_retrieved(&a, 1.0, None) - 2.0 / 3.0).abs() < 1e-15);
        // [0,1,1]: (1/2 + 2/3) / 2 = 0.5833: same chunks, another order, a quarter lower.
        let b = v(&[0, 1, 1]);
        assert!((average_precision_retrieved(&b, 1.0, None) - 7.0 / 12.0).abs() < 1e-15);
        // [1,1,0] is exactly 1.0, not 0.9999999999.
        assert_eq!(average_precision_retrieved(&v(&[1, 1, 0]), 1.0, None), 1.0);
    }

    #[test]
    fn trec_denominators() {
        let a = v(&[1, 0, 1]);
        assert!((average_precision(&a, 1.0, 4, None) - (1.0 + 2.0 / 3.0) / 4.0).abs() < 1e-15);
        assert_eq!(precision_at(&a, 1.0, 5), 2.0 / 5.0);
        assert_eq!(recall_at(&a, 1.0, 0, Some(5)), 0.0);
        assert_eq!(reciprocal_rank(&v(&[0, 0, 1]), 1.0, None), 1.0 / 3.0);
        assert_eq!(reciprocal_rank(&v(&[0, 0, 1]), 1.0, Some(2)), 0.0);
        assert_eq!(success_at(&v(&[0, 0, 1]), 1.0, Some(3)), 1.0);
    }

    #[test]
    fn f1_differs_from_ranx_when_few_retrieved() {
        // NOTES.md: 3 retrieved, 2 relevant, R = 4, k = 5.
        let g = v(&[1, 1, 0]);
        let trec = f_measure(precision_retrieved(&g, 1.0, Some(5)), recall_at(&g, 1.0, 4, Some(5)), 1.0);
        let ranx = f_measure(precision_at(&g, 1.0, 5), recall_at(&g, 1.0, 4, Some(5)), 1.0);
        assert!((trec - 0.5714285714).abs() < 1e-9);
        assert!((ranx - 0.4444444444).abs() < 1e-9);
    }

    #[test]
    fn rank_log2_is_f64_log2_bit_for_bit() {
        for n in (0..3000).chain([1 << 20, usize::MAX]) {
            assert_eq!(rank_log2(n).to_bits(), (n as f64).log2().to_bits(), "{n}");
        }
    }

    #[test]
    fn ndcg_linear_and_exponential() {
        let g = [3.0, 2.0, 0.0, 1.0];
        let ideal = [3.0, 2.0, 1.0];
        let lin = ndcg(&g, &ideal, None, Gain::Linear);
        let want = (3.0 + 2.0 / 3f64.log2() + 1.0 / 5f64.log2()) / (3.0 + 2.0 / 3f64.log2() + 1.0 / 2.0);
        assert!((lin - want).abs() < 1e-12);
        assert!(ndcg(&g, &ideal, None, Gain::Exponential) < 1.0);
        assert_eq!(ndcg(&g, &[], None, Gain::Linear), 0.0);
        assert_eq!(ndcg(&ideal, &ideal, Some(2), Gain::Exponential), 1.0);
    }
}
