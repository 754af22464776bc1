//! A trec_eval 10.0 compatible evaluator.
//!
//! [`evaluate`] takes parsed qrels and run rows and returns every requested
//! measure per query plus the summary, exactly as trec_eval computes them:
//! documents are ranked by score descending, ties broken by document id
//! descending (byte order); the rank column of the run is ignored; queries are
//! the qrels' queries (run-only queries are ignored; a qrels-only query is an
//! error unless `complete` (`-c`) counts it as an empty ranking).

pub mod measures;
pub mod parse;
pub mod runfile;

use std::fmt::Write as _;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
pub use measures::{known_measures, Average, Kind, Measure, Print};
pub use parse::{parse_qrels, parse_run, read_text, FileText, QrelsRow, RunRow};
pub use runfile::{Ranked, RankingSource, RowSource, RunFile};

/// A retrieved document that is not in the qrels.
pub const RELVALUE_NONPOOL: i64 = -1;
/// A document in the qrels with a negative judgement (in the pool, unjudged).
pub const RELVALUE_UNJUDGED: i64 = -2;

/// trec_eval's command-line parameters that change the numbers.
#[derive(Clone, Debug)]
pub struct Options {
    /// `-l`: a document is relevant when its judgement is >= this.
    pub relevance_level: i64,
    /// `-M`: only the first N documents of each ranking.
    pub max_docs_per_query: Option<usize>,
    /// `-c`: average over every qrels query, missing ones counting as empty.
    pub complete: bool,
    /// `-J`: drop unjudged documents from rankings before measuring.
    pub judged_only: bool,
    /// `-N`: number of documents in the collection (utility).
    pub num_docs_in_coll: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options { relevance_level: 1, max_docs_per_query: None, complete: false, judged_only: false, num_docs_in_coll: 0 }
    }
}

/// The judged ranking of one query, from which every measure is computed.
#[derive(Clone, Debug, Default)]
pub struct ResRels {
    /// Relevance of each ranked document (or RELVALUE_*), best rank first.
    pub rel_list: Vec<i64>,
    /// `rel_list` as grades for the shared metric kernels.
    pub grades: Vec<f64>,
    pub num_rel_ret: i64,
    pub num_nonpool: i64,
    pub num_unjudged_in_pool: i64,
    /// Judgements >= relevance level (retrieved or not).
    pub num_rel: i64,
    /// Count of judgements at each level >= 0.
    pub rel_levels: Vec<i64>,
    /// One past the highest level with a judgement.
    pub num_rel_levels: usize,
}

impl ResRels {
    pub fn num_ret(&self) -> i64 {
        self.rel_list.len() as i64
    }

    /// Judged levels > 0 in decreasing order, one entry per judgement: the ideal ranking.
    pub fn ideal_grades(&self) -> Vec<f64> {
        let mut out = Vec::new();
        for level in (1..self.num_rel_levels).rev() {
            out.extend(std::iter::repeat(level as f64).take(self.rel_levels[level].max(0) as usize));
        }
        out
    }
}

/// Judgements of one query, sorted by document id.
struct Judged<'a> {
    qid: &'a str,
    docs: Vec<(&'a str, i64)>,
    /// docno -> judgement, for ranking lookups.
    lookup: FxHashMap<&'a str, i64>,
}

/// Group qrels rows by query (sorted by query id, as trec_eval) and check for duplicates.
fn group_qrels<'a>(rows: &[QrelsRow<'a>], path: &str) -> Result<Vec<Judged<'a>>> {
    let mut index: FxHashMap<&'a str, usize> = FxHashMap::default();
    let mut groups: Vec<(&'a str, Vec<(&'a str, i64, usize)>)> = Vec::new();
    let mut last: Option<(&str, usize)> = None;
    for row in rows {
        // Qrels come grouped by query: skip the hash lookup while the query does not change.
        let g = match last {
            Some((q, g)) if q == row.qid => g,
            _ => *index.entry(row.qid).or_insert_with(|| {
                groups.push((row.qid, Vec::new()));
                groups.len() - 1
            }),
        };
        last = Some((row.qid, g));
        groups[g].1.push((row.docno, row.rel, row.line));
    }
    let mut judged: Vec<Judged<'a>> = groups
        .into_par_iter()
        .map(|(qid, mut docs)| {
            docs.sort_unstable_by(|a, b| a.0.cmp(b.0).then(a.2.cmp(&b.2)));
            if let Some(w) = docs.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(Error::parse(
                    path,
                    w[1].2,
                    format!("document {} is judged twice for query {qid} (first at line {})", w[1].0, w[0].2),
                ));
            }
            let lookup = docs.iter().map(|d| (d.0, d.1)).collect();
            Ok(Judged { qid, docs: docs.into_iter().map(|d| (d.0, d.1)).collect(), lookup })
        })
        .collect::<Result<_>>()?;
    judged.par_sort_unstable_by(|a, b| a.qid.cmp(b.qid));
    Ok(judged)
}

/// Sort a ranking as trec_eval does: score descending, then document id descending.
fn rank(ranking: &mut [Ranked<'_>]) {
    ranking.sort_unstable_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then_with(|| b.0.cmp(a.0)));
}

fn form_res_rels(judged: &Judged<'_>, ranking: &[Ranked<'_>], opts: &Options) -> ResRels {
    let n = opts.max_docs_per_query.map_or(ranking.len(), |m| m.min(ranking.len()));
    let max_rel = judged.docs.iter().map(|d| d.1).max().unwrap_or(0).max(0) as usize;
    let mut rel_levels = vec![0i64; max_rel + 1];
    for &(_, rel) in &judged.docs {
        if rel >= 0 {
            rel_levels[rel as usize] += 1;
        }
    }
    let mut rr = ResRels { rel_list: Vec::with_capacity(n), ..Default::default() };
    for &(docno, _, _) in &ranking[..n] {
        let rel = match judged.lookup.get(docno) {
            Some(&r) if r < 0 => RELVALUE_UNJUDGED,
            Some(&r) => r,
            None => RELVALUE_NONPOOL,
        };
        if opts.judged_only && rel < 0 {
            continue;
        }
        match rel {
            RELVALUE_NONPOOL => rr.num_nonpool += 1,
            RELVALUE_UNJUDGED => rr.num_unjudged_in_pool += 1,
            r if r >= opts.relevance_level => rr.num_rel_ret += 1,
            _ => {}
        }
        rr.rel_list.push(rel);
    }
    rr.grades = rr.rel_list.iter().map(|&r| r as f64).collect();
    for (level, &count) in rel_levels.iter().enumerate() {
        if count > 0 {
            rr.num_rel_levels = level + 1;
            if level as i64 >= opts.relevance_level {
                rr.num_rel += count;
            }
        }
    }
    rr.rel_levels = rel_levels;
    rr
}

/// Per-query values of one query.
#[derive(Clone, Debug)]
pub struct QueryResult {
    pub qid: String,
    pub values: Vec<f64>,
    pub relstring: Option<String>,
    /// True when the query was missing from the run and evaluated as empty (`-c`).
    pub missing: bool,
}

/// The evaluation of a run: measures, per-query values and the summary.
#[derive(Clone, Debug)]
pub struct Evaluation {
    pub measures: Vec<Measure>,
    pub queries: Vec<QueryResult>,
    pub summary: Vec<f64>,
    pub run_id: String,
    /// Queries of the run that have no judgements (ignored, as in trec_eval).
    pub run_only_queries: Vec<String>,
}

impl Evaluation {
    /// Names of all values, in order (one per cutoff for array measures).
    pub fn value_names(&self) -> Vec<&str> {
        self.measures.iter().flat_map(|m| m.names.iter().map(|s| s.as_str())).collect()
    }
}

/// Evaluate `run` rows against `qrels` rows with trec_eval's semantics.
pub fn evaluate(
    qrels: &[QrelsRow<'_>],
    run: &[RunRow<'_>],
    measure_args: &[String],
    opts: &Options,
    qrels_path: &str,
    run_path: &str,
) -> Result<Evaluation> {
    let measures = measures::resolve(measure_args)?;
    let judged = group_qrels(qrels, qrels_path)?;
    let run_id = run.last().map_or("", |r| r.run_id).to_string();
    evaluate_source(measures, &judged, &RowSource::new(run, run_path), run_id, opts, qrels_path)
}

/// Evaluate the texts of a qrels file and a run file (the fast path of `ragmeter trec`).
pub fn evaluate_texts(
    qrels_text: &str,
    run_text: &str,
    measure_args: &[String],
    opts: &Options,
    qrels_path: &str,
    run_path: &str,
) -> Result<Evaluation> {
    let measures = measures::resolve(measure_args)?;
    let (judged, run) = rayon::join(
        || parse_qrels(qrels_text, qrels_path).and_then(|rows| group_qrels(&rows, qrels_path)),
        || RunFile::index(run_text, run_path),
    );
    let (judged, run) = (judged?, run?);
    let run_id = run.run_id.to_string();
    evaluate_source(measures, &judged, &run, run_id, opts, qrels_path)
}

fn evaluate_source<'a>(
    measures: Vec<Measure>,
    judged: &[Judged<'a>],
    source: &dyn RankingSource<'a>,
    run_id: String,
    opts: &Options,
    qrels_path: &str,
) -> Result<Evaluation> {
    if !opts.complete {
        if let Some(missing) = judged.iter().find(|j| !source.contains(j.qid)) {
            return Err(Error::input(format!(
                "{}: query {} has judgements in {qrels_path} but no ranking in the run; \
                 pass -c to count such queries as empty rankings",
                source.path(),
                missing.qid
            )));
        }
    }
    let mut run_only: Vec<String> = source
        .qids()
        .into_iter()
        .filter(|q| judged.binary_search_by(|j| j.qid.cmp(q)).is_err())
        .map(|q| q.to_string())
        .collect();
    run_only.sort();

    let width: usize = measures.iter().map(|m| m.names.len()).sum();
    let queries: Vec<QueryResult> = judged
        .par_iter()
        .map_init(Vec::new, |ranking, j| {
            ranking.clear();
            let missing = !source.contains(j.qid);
            if missing {
                ranking.push(("ceci_nest_pas_un_docno", 1.0, 0));
            } else {
                source.ranking(j.qid, ranking)?;
                rank_checked(j.qid, ranking, source)?;
            }
            Ok(evaluate_query(j, ranking, missing, &measures, width, opts))
        })
        .collect::<Result<_>>()?;
    let summary = summarize(&measures, &queries, judged, opts, width);
    Ok(Evaluation { measures, queries, summary, run_id, run_only_queries: run_only })
}

/// Refuse duplicate documents (naming both lines), then rank as trec_eval does.
fn rank_checked<'a>(qid: &str, ranking: &mut [Ranked<'a>], source: &dyn RankingSource<'a>) -> Result<()> {
    let mut seen: FxHashMap<&str, usize> = FxHashMap::with_capacity_and_hasher(ranking.len(), Default::default());
    for &(doc, _, loc) in ranking.iter() {
        if let Some(&first) = seen.get(doc) {
            let (first, second) = (first.min(loc), first.max(loc));
            return Err(Error::parse(
                source.path(),
                source.line(second),
                format!("document {doc} appears twice in the ranking of query {qid} (first at line {})", source.line(first)),
            ));
        }
        seen.insert(doc, loc);
    }
    rank(ranking);
    Ok(())
}

fn evaluate_query(
    judged: &Judged<'_>,
    ranking: &[Ranked<'_>],
    missing: bool,
    measures: &[Measure],
    width: usize,
    opts: &Options,
) -> QueryResult {
    let rr = form_res_rels(judged, ranking, opts);
    let mut values = vec![0.0; width];
    let mut relstring = None;
    for m in measures {
        let out = &mut values[m.offset..m.offset + m.names.len()];
        measures::compute(m, &rr, opts.relevance_level, opts.num_docs_in_coll, out);
        if m.kind == Kind::Relstring {
            relstring = Some(if missing { String::new() } else { measures::relstring(m, &rr) });
        }
        // trec_eval zeroes these for a query evaluated on its stand-in empty ranking.
        if missing {
            match m.kind {
                Kind::NumRet | Kind::Unj | Kind::RbpResid => out.iter_mut().for_each(|v| *v = 0.0),
                Kind::Utility if m.names[0] == "utility" => out[0] = 0.0,
                _ => {}
            }
        }
    }
    QueryResult { qid: judged.qid.to_string(), values, relstring, missing }
}

fn summarize(measures: &[Measure], queries: &[QueryResult], judged: &[Judged<'_>], opts: &Options, width: usize) -> Vec<f64> {
    let mut sums = vec![0.0; width];
    for q in queries {
        for (s, v) in sums.iter_mut().zip(&q.values) {
            *s += v;
        }
    }
    let n = queries.len() as f64;
    for m in measures {
        let vals = &mut sums[m.offset..m.offset + m.names.len()];
        match m.average {
            Average::Mean => vals.iter_mut().for_each(|v| *v /= n),
            Average::Geometric => vals.iter_mut().for_each(|v| *v = (*v / n).exp()),
            Average::NumQ => vals[0] = n,
            // With -c, trec_eval recounts from the qrels: judgements > 0, whatever -l says.
            Average::NumRel if opts.complete => {
                vals[0] = judged.iter().map(|j| j.docs.iter().filter(|d| d.1 > 0).count()).sum::<usize>() as f64
            }
            Average::NumRel | Average::Sum | Average::Nothing => {}
        }
    }
    sums
}

/// Render an evaluation exactly as trec_eval prints it.
pub fn format_trec(eval: &Evaluation, per_query: bool, summary: bool) -> String {
    let mut out = String::with_capacity(if per_query { eval.queries.len() * eval.summary.len() * 40 } else { 4096 });
    if per_query {
        for q in &eval.queries {
            for m in &eval.measures {
                write_values(&mut out, m, &q.qid, &q.values, q.relstring.as_deref(), false);
            }
        }
    }
    if summary {
        for m in &eval.measures {
            if m.kind == Kind::Runid {
                let _ = writeln!(out, "{:<22}\tall\t{}", "runid", eval.run_id);
            } else {
                write_values(&mut out, m, "all", &eval.summary, None, true);
            }
        }
    }
    out
}

fn write_values(out: &mut String, m: &Measure, qid: &str, values: &[f64], relstring: Option<&str>, summary: bool) {
    let vals = &values[m.offset..m.offset + m.names.len()];
    match (m.print, summary) {
        (Print::Runid, _) | (Print::SummaryOnly, false) | (Print::Relstring, true) => {}
        (Print::Relstring, false) => {
            let _ = writeln!(out, "{:<22}\t{qid}\t'{}'", m.names[0], relstring.unwrap_or(""));
        }
        (Print::Long, _) | (Print::SummaryOnly, true) if m.kind != Kind::GmMap && m.kind != Kind::GmBpref => {
            let _ = writeln!(out, "{:<22}\t{qid}\t{}", m.names[0], vals[0] as i64);
        }
        _ => {
            for (name, v) in m.names.iter().zip(vals) {
                let _ = writeln!(out, "{name:<22}\t{qid}\t{:>6}", measures::c_fixed(*v, 4));
            }
        }
    }
}
