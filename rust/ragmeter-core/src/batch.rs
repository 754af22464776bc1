//! Rank metrics over a column-oriented batch of ranked lists, in parallel.
//!
//! A batch is flat: `offsets` (n + 1 entries) cut `grades` into one ranked list
//! per query; `num_relevant` gives each query's number of relevant items (for
//! recall and AP's denominator); optional `ideal_offsets` / `ideal_grades` give
//! each query's judged grades for NDCG's ideal ranking (when absent, the ideal is
//! the query's own retrieved grades, sorted). Grades below zero are unjudged.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::metrics::{self, Gain};

/// A metric at an optional cutoff. Names (see [`Metric::parse`]) say which
/// definition is meant wherever the field disagrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// AP with denominator = number of relevant items (trec_eval `map`, `map_cut`).
    AveragePrecision(Option<usize>),
    /// AP with denominator = relevant items retrieved (ragas context precision).
    AveragePrecisionRetrieved(Option<usize>),
    ReciprocalRank(Option<usize>),
    Ndcg(Option<usize>, Gain),
    /// Hits / k, always k (trec_eval `P_k`).
    Precision(usize),
    /// Hits / items retrieved within k (trec_eval `set_P` after `-M k`).
    PrecisionRetrieved(Option<usize>),
    Recall(Option<usize>),
    /// Some relevant item within k (trec_eval `success_k`, "hit rate").
    Hit(Option<usize>),
    RPrecision,
    /// F1 with P = hits / k (ranx `f1@k`).
    F1(usize),
    /// F1 with P = hits / items retrieved within k (trec_eval `-M k -m set_F`).
    F1Retrieved(Option<usize>),
    /// 1-based rank of the first relevant item within k, 0 when none.
    FirstRelevantRank(Option<usize>),
    NumRetrieved(Option<usize>),
    NumRelevantRetrieved(Option<usize>),
}

impl Metric {
    /// Parse `name[@k]`: `ap`, `ap_retrieved`, `rr` (alias `mrr`), `ndcg`,
    /// `ndcg_exp`, `p`, `p_retrieved`, `recall`, `hit` (alias `success`),
    /// `rprec`, `f1`, `f1_retrieved`, `first_relevant_rank`, `num_ret`, `num_rel_ret`.
    pub fn parse(spec: &str) -> Result<Metric> {
        let (name, k) = match spec.split_once('@') {
            Some((n, k)) => {
                let k: usize = match k.parse::<usize>() {
                    Ok(k) if k > 0 => k,
                    Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                        return Err(Error::measure(format!(
                            "metric '{spec}': the cutoff after '@' is above {}, the largest this machine counts",
                            usize::MAX
                        )))
                    }
                    _ => return Err(Error::measure(format!("metric '{spec}': the cutoff after '@' must be a positive integer"))),
                };
                (n, Some(k))
            }
            None => (spec, None),
        };
        let need_k = |k: Option<usize>| {
            k.ok_or_else(|| Error::measure(format!("metric '{spec}' needs a cutoff, e.g. '{name}@10'")))
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "ap" | "map" => Metric::AveragePrecision(k),
            "ap_retrieved" => Metric::AveragePrecisionRetrieved(k),
            "rr" | "mrr" | "recip_rank" => Metric::ReciprocalRank(k),
            "ndcg" => Metric::Ndcg(k, Gain::Linear),
            "ndcg_exp" | "ndcg_burges" => Metric::Ndcg(k, Gain::Exponential),
            "p" | "precision" => Metric::Precision(need_k(k)?),
            "p_retrieved" | "precision_retrieved" => Metric::PrecisionRetrieved(k),
            "recall" => Metric::Recall(k),
            "hit" | "success" | "hit_rate" => Metric::Hit(k),
            "rprec" => Metric::RPrecision,
            "f1" => Metric::F1(need_k(k)?),
            "f1_retrieved" => Metric::F1Retrieved(k),
            "first_relevant_rank" => Metric::FirstRelevantRank(k),
            "num_ret" => Metric::NumRetrieved(k),
            "num_rel_ret" => Metric::NumRelevantRetrieved(k),
            _ => {
                return Err(Error::measure(format!(
                    "unknown metric '{name}'; known: ap, ap_retrieved, rr, ndcg, ndcg_exp, p, p_retrieved, recall, hit, \
                     rprec, f1, f1_retrieved, first_relevant_rank, num_ret, num_rel_ret"
                )))
            }
        })
    }

    fn value(&self, grades: &[f64], ideal: &[f64], num_rel: usize, level: f64) -> f64 {
        use Metric::*;
        match *self {
            AveragePrecision(k) => metrics::average_precision(grades, level, num_rel, k),
            AveragePrecisionRetrieved(k) => metrics::average_precision_retrieved(grades, level, k),
            ReciprocalRank(k) => metrics::reciprocal_rank(grades, level, k),
            Ndcg(k, gain) => metrics::ndcg(grades, ideal, k, gain),
            Precision(k) => metrics::precision_at(grades, level, k),
            PrecisionRetrieved(k) => metrics::precision_retrieved(grades, level, k),
            Recall(k) => metrics::recall_at(grades, level, num_rel, k),
            Hit(k) => metrics::success_at(grades, level, k),
            RPrecision => metrics::r_precision(grades, level, num_rel),
            F1(k) => metrics::f_measure(
                metrics::precision_at(grades, level, k),
                metrics::recall_at(grades, level, num_rel, Some(k)),
                1.0,
            ),
            F1Retrieved(k) => metrics::f_measure(
                metrics::precision_retrieved(grades, level, k),
                metrics::recall_at(grades, level, num_rel, k),
                1.0,
            ),
            FirstRelevantRank(k) => metrics::first_relevant_rank(grades, level, k).map_or(0.0, |r| r as f64),
            NumRetrieved(k) => k.map_or(grades.len(), |k| k.min(grades.len())) as f64,
            NumRelevantRetrieved(k) => metrics::hits(grades, level, k) as f64,
        }
    }
}

/// Borrowed view of a batch (see the module docs).
pub struct Batch<'a> {
    pub offsets: &'a [usize],
    pub grades: &'a [f64],
    pub num_relevant: &'a [f64],
    pub ideal_offsets: Option<&'a [usize]>,
    pub ideal_grades: Option<&'a [f64]>,
}

impl Batch<'_> {
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn validate(&self) -> Result<()> {
        check_offsets(self.offsets, self.grades.len(), "offsets")?;
        if self.num_relevant.len() != self.len() {
            return Err(Error::input(format!(
                "num_relevant has {} entries for {} queries",
                self.num_relevant.len(),
                self.len()
            )));
        }
        match (self.ideal_offsets, self.ideal_grades) {
            (Some(o), Some(g)) => {
                check_offsets(o, g.len(), "ideal_offsets")?;
                if o.len() != self.offsets.len() {
                    return Err(Error::input("ideal_offsets must have one entry per query plus one"));
                }
            }
            (None, None) => {}
            _ => return Err(Error::input("ideal_offsets and ideal_grades go together")),
        }
        Ok(())
    }
}

fn check_offsets(offsets: &[usize], total: usize, name: &str) -> Result<()> {
    if offsets.is_empty() || offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) || offsets[offsets.len() - 1] != total {
        return Err(Error::input(format!("{name} must start at 0, never decrease and end at the number of values ({total})")));
    }
    Ok(())
}

/// Compute `metrics` for every query; row-major `len() x metrics.len()`.
pub fn compute(batch: &Batch<'_>, metrics: &[Metric], level: f64) -> Result<Vec<f64>> {
    batch.validate()?;
    let width = metrics.len();
    let mut out = vec![0.0; batch.len() * width];
    if width == 0 {
        return Ok(out);
    }
    let needs_ideal = metrics.iter().any(|m| matches!(m, Metric::Ndcg(..)));
    out.par_chunks_mut(width).enumerate().with_min_len(256).for_each_init(Vec::new, |scratch, (q, row)| {
        let grades = &batch.grades[batch.offsets[q]..batch.offsets[q + 1]];
        let ideal: &[f64] = match (batch.ideal_offsets, batch.ideal_grades) {
            (Some(o), Some(g)) => &g[o[q]..o[q + 1]],
            _ if needs_ideal => {
                scratch.clear();
                scratch.extend(grades.iter().copied().filter(|&g| g > 0.0));
                scratch.sort_unstable_by(|a, b| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal));
                scratch
            }
            _ => &[],
        };
        let num_rel = batch.num_relevant[q].max(0.0) as usize;
        for (slot, m) in row.iter_mut().zip(metrics) {
            *slot = m.value(grades, ideal, num_rel, level);
        }
    });
    Ok(out)
}


/// Per (threshold, query) outcome of a score-threshold sweep.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sweep {
    /// Row-major `thresholds x queries`.
    pub hit: Vec<f64>,
    pub reciprocal_rank: Vec<f64>,
    pub kept: Vec<f64>,
}

/// For each threshold `t`: keep the items with `score >= t` (a NaN score —
/// no score given — always passes), in their ranked order, then the first `k`;
/// report per query whether a relevant item is kept, the reciprocal rank of
/// the first one, and how many items are kept.
pub fn threshold_sweep(offsets: &[usize], grades: &[f64], scores: &[f64], thresholds: &[f64], k: usize, level: f64) -> Result<Sweep> {
    check_offsets(offsets, grades.len(), "offsets")?;
    if scores.len() != grades.len() {
        return Err(Error::input("scores and grades must have the same length"));
    }
    let n = offsets.len() - 1;
    let mut sweep = Sweep { hit: vec![0.0; n * thresholds.len()], reciprocal_rank: vec![0.0; n * thresholds.len()], kept: vec![0.0; n * thresholds.len()] };
    let rows = sweep.hit.par_chunks_mut(n.max(1)).zip(sweep.reciprocal_rank.par_chunks_mut(n.max(1))).zip(sweep.kept.par_chunks_mut(n.max(1)));
    rows.zip(thresholds.par_iter()).for_each(|(((hit, rr), kept), &t)| {
        for q in 0..n {
            let (mut taken, mut first) = (0usize, 0usize);
            for i in offsets[q]..offsets[q + 1] {
                if taken == k {
                    break;
                }
                let s = scores[i];
                if s.is_nan() || s >= t {
                    taken += 1;
                    if first == 0 && grades[i] >= level {
                        first = taken;
                    }
                }
            }
            kept[q] = taken as f64;
            if first > 0 {
                hit[q] = 1.0;
                rr[q] = 1.0 / first as f64;
            }
        }
    });
    Ok(sweep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_matches_single_kernels() {
        let grades = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0];
        let offsets = [0, 3, 3, 6];
        let num_rel = [2.0, 1.0, 4.0];
        let b = Batch { offsets: &offsets, grades: &grades, num_relevant: &num_rel, ideal_offsets: None, ideal_grades: None };
        let ms: Vec<Metric> = ["ap", "ap_retrieved", "rr", "p@2", "recall@2", "hit@1", "first_relevant_rank", "ndcg@3"]
            .iter()
            .map(|s| Metric::parse(s).unwrap())
            .collect();
        let out = compute(&b, &ms, 1.0).unwrap();
        assert_eq!(&out[..8], &[(1.0 + 2.0 / 3.0) / 2.0, (1.0 + 2.0 / 3.0) / 2.0, 1.0, 0.5, 0.5, 1.0, 1.0, metrics::ndcg(&grades[..3], &[1.0, 1.0], Some(3), Gain::Linear)]);
        // An empty ranking scores 0 everywhere.
        assert!(out[8..16].iter().all(|&v| v == 0.0));
        assert_eq!(out[16 + 6], 2.0);
    }

    #[test]
    fn sweep_keeps_scores_above_threshold_then_top_k() {
        // One query: relevant item scored 0.15 at rank 2.
        let grades = [0.0, 1.0, 0.0];
        let scores = [0.9, 0.15, f64::NAN];
        let s = threshold_sweep(&[0, 3], &grades, &scores, &[0.0, 0.2], 2, 1.0).unwrap();
        assert_eq!(s.hit, vec![1.0, 0.0]);
        assert_eq!(s.reciprocal_rank, vec![0.5, 0.0]);
        assert_eq!(s.kept, vec![2.0, 2.0]);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let b = Batch { offsets: &[0, 5], grades: &[1.0], num_relevant: &[1.0], ideal_offsets: None, ideal_grades: None };
        assert!(compute(&b, &[Metric::Hit(None)], 1.0).is_err());
        assert!(Metric::parse("p").is_err());
        assert!(Metric::parse("ndcg@0").is_err());
        assert!(Metric::parse("bogus@3").is_err());
        // A cutoff beyond usize is not "not a positive integer" (it said so for 2^70).
        let err = Metric::parse("p@1180591620717411303424").unwrap_err().to_string();
        assert_eq!(err, format!("metric 'p@1180591620717411303424': the cutoff after '@' is above {}, the largest this machine counts", usize::MAX));
        assert_eq!(Metric::parse(&format!("p@{}", usize::MAX)).unwrap(), Metric::Precision(usize::MAX));
    }
}
