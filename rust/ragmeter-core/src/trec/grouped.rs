//! In-memory columns grouped by query: the dict-of-dicts shape pytrec_eval and
//! ranx users have (one group per query), or a table whose rows come in runs of
//! one query. Each query's ranking is read straight from the columns; no table of
//! rows is built. Errors name the input (`qrels`, `run`) and the 1-based row.

use rayon::prelude::*;

use super::{
    evaluate_judged, measures, missing_query_error, positive, summarize, Evaluation, Judged, JudgedDoc, Options, Origin, Shown,
};
use crate::error::{Error, Result};
use crate::evidence::Strings;

/// Rows of qrels or of a run, in groups of one query: group `g` has query id
/// `qids[g]` and rows `offsets[g]..offsets[g + 1]` of `docs` and `values`. A query
/// may have several groups (its rows are then taken in group order); empty groups
/// are ignored, as a query without rows is absent.
pub struct Grouped<'a, S: Strings + ?Sized, V> {
    pub qids: Vec<&'a str>,
    pub offsets: &'a [usize],
    pub docs: &'a S,
    pub values: &'a [V],
    /// How messages show the ids: [`Shown::Bytes`] for the columns of a file read byte for byte.
    pub shown: Shown,
}

impl<'a, S: Strings + ?Sized, V: Sync> Grouped<'a, S, V> {
    fn check(&self, what: &str) -> Result<()> {
        let n = self.values.len();
        if self.docs.len() != n {
            return Err(Error::input(format!("{what}: {} documents but {n} values", self.docs.len())));
        }
        let o = self.offsets;
        if o.len() != self.qids.len() + 1 || o[0] != 0 || o[o.len() - 1] != n || o.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::input(format!(
                "{what}: group offsets must be one more than the query ids, start at 0, never decrease and end at {n}"
            )));
        }
        Ok(())
    }

    /// The non-empty groups of each query id, queries in id order, groups in input order.
    fn by_query(&self) -> Vec<(&'a str, Vec<usize>)> {
        let mut order: Vec<usize> = (0..self.qids.len()).filter(|&g| self.offsets[g] < self.offsets[g + 1]).collect();
        // Stable: the groups of one query keep their input order.
        order.par_sort_by(|&a, &b| self.qids[a].cmp(self.qids[b]));
        let mut out: Vec<(&str, Vec<usize>)> = Vec::with_capacity(order.len());
        for g in order {
            match out.last_mut() {
                Some((q, groups)) if *q == self.qids[g] => groups.push(g),
                _ => out.push((self.qids[g], vec![g])),
            }
        }
        out
    }

    fn rows<'g>(&self, groups: &'g [usize]) -> impl Iterator<Item = usize> + 'g
    where
        'a: 'g,
    {
        let offsets = self.offsets;
        groups.iter().flat_map(move |&g| offsets[g]..offsets[g + 1])
    }
}

/// Evaluate a run against judgements, both grouped by query, with trec_eval's
/// semantics (as [`super::evaluate`] does for rows).
pub fn evaluate_grouped<S: Strings + ?Sized>(
    qrels: &Grouped<'_, S, i64>,
    run: &Grouped<'_, S, f64>,
    measure_args: &[String],
    opts: &Options,
    run_id: &str,
) -> Result<Evaluation> {
    let measures = measures::resolve(measure_args)?;
    qrels.check("qrels")?;
    run.check("run")?;
    if let Some(i) = run.values.iter().position(|s| s.is_nan()) {
        return Err(Error::parse("run", i + 1, "score is NaN"));
    }
    if qrels.values.is_empty() {
        return Err(Error::input("qrels: no judgements"));
    }
    let all: Vec<JudgedDoc<'_>> =
        (0..qrels.values.len()).into_par_iter().map(|i| JudgedDoc { doc: qrels.docs.get(i), rel: qrels.values[i], loc: i + 1 }).collect();
    let judged_groups = qrels.by_query();
    // A query judged in several groups gets its judgements copied together; one group is a slice of `all`.
    let merged: Vec<Vec<JudgedDoc<'_>>> = judged_groups
        .iter()
        .filter(|(_, groups)| groups.len() > 1)
        .map(|(_, groups)| qrels.rows(groups).map(|i| all[i]).collect())
        .collect();
    let mut merged_iter = merged.iter();
    let judged: Vec<Judged<'_, '_>> = judged_groups
        .iter()
        .map(|(qid, groups)| {
            let docs = match groups[..] {
                [g] => &all[qrels.offsets[g]..qrels.offsets[g + 1]],
                _ => &merged_iter.next().expect("one merged list per query with several groups")[..],
            };
            Judged { qid, docs }
        })
        .collect();

    // Both lists are sorted by query id: one merge pairs each judged query with its run groups.
    let ranked = run.by_query();
    let mut groups_of: Vec<&[usize]> = vec![&[]; judged.len()];
    let mut run_only_queries = Vec::new();
    let mut j = 0;
    for (qid, groups) in &ranked {
        while j < judged.len() && judged[j].qid < *qid {
            j += 1;
        }
        match judged.get(j) {
            Some(jq) if jq.qid == *qid => groups_of[j] = groups,
            _ => run_only_queries.push(qid.to_string()),
        }
    }
    if !opts.complete {
        if let Some(j) = groups_of.iter().position(|g| g.is_empty()) {
            return Err(missing_query_error("run", judged[j].qid, "qrels", qrels.shown));
        }
    }
    let width: usize = measures.iter().map(|m| m.names.len()).sum();
    let origins = (Origin { path: "qrels", text: None, shown: qrels.shown }, Origin { path: "run", text: None, shown: run.shown });
    let queries = evaluate_judged(&judged, &measures, width, opts, origins, |j, ranking| {
        ranking.extend(run.rows(groups_of[j]).map(|i| (run.docs.get(i), run.values[i], i + 1)));
        !groups_of[j].is_empty()
    })?;
    let summary = summarize(&measures, &queries, positive(&judged), opts, width);
    Ok(Evaluation { measures, queries, summary, run_id: run_id.to_string(), run_only_queries })
}

/// Groups of consecutive rows with the same query id, for a query column with one
/// id per row: (query id of each group, offsets of the groups).
pub fn consecutive_groups<S: Strings + ?Sized>(qids: &S) -> (Vec<&str>, Vec<usize>) {
    let mut ids: Vec<&str> = Vec::new();
    let mut offsets = vec![0];
    for i in 0..qids.len() {
        let q = qids.get(i);
        if ids.last() != Some(&q) {
            if i > 0 {
                offsets.push(i);
            }
            ids.push(q);
        }
    }
    if !ids.is_empty() {
        offsets.push(qids.len());
    }
    (ids, offsets)
}
