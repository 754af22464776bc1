//! A trec_eval 10.0 compatible evaluator.
//!
//! [`evaluate`] takes parsed qrels and run rows and returns every requested
//! measure per query plus the summary, exactly as trec_eval computes them:
//! documents are ranked by score descending, ties broken by document id
//! descending (byte order); the rank column of the run is ignored; queries are
//! the qrels' queries (run-only queries are ignored; a qrels-only query is an
//! error unless `complete` (`-c`) counts it as an empty ranking).
//!
//! [`evaluate_texts`] reads the text of TREC files in one parallel,
//! streaming pass instead (`stream.rs`); both paths print the same output.

mod grouped;
pub mod measures;
pub mod parse;
mod shown;
mod stream;

use std::fmt::Write as _;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use std::hash::Hasher as _;

use crate::error::{Error, Result};
pub use grouped::{consecutive_groups, evaluate_grouped, Grouped};
pub use measures::{known_measures, Average, Kind, Measure, Print};
pub use parse::{
    latin1_bytes, parse_qrels, parse_run, read_one, read_pair, read_text, text_from_bytes, FileText, NotUtf8, QrelsRow, RunRow,
    Source, TrecTexts,
};
pub use shown::Shown;

/// A ranking entry: document, score, location (a line number, or a byte offset in a file).
pub type Ranked<'a> = (&'a str, f64, usize);

/// The ranking trec_eval evaluates for a qrels query missing from the run (with `-c`).
const MISSING_STAND_IN: &str = "ceci_nest_pas_un_docno";
/// The largest relevance grade evaluated. trec_eval sizes a count per grade from 0 to
/// the highest (`rel_levels`), as ragmeter does: a grade of 10^9 would take 8 GB.
pub const MAX_GRADE: i64 = 1_000_000;

/// The most values an evaluation holds (judged queries x values per query: 2 GiB of
/// f64). `-m P.1,2,...,300000` on 2,000 queries was a 4.8 GB allocation (an abort).
pub const MAX_VALUES: usize = 1 << 28;

/// Refuse measures whose values for `n_queries` queries would pass [`MAX_VALUES`].
fn check_values(n_queries: usize, width: usize) -> Result<()> {
    if n_queries.checked_mul(width).is_none_or(|v| v > MAX_VALUES) {
        return Err(Error::measure(format!(
            "the measures ask for {width} values per query, {n_queries} queries: more than the {MAX_VALUES} values \
             (2 GiB) ragmeter holds; ask for fewer cutoffs"
        )));
    }
    Ok(())
}

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
    /// Judged levels > 0 in decreasing order, one entry per judgement: the ideal ranking.
    ideal: Vec<f64>,
}

impl ResRels {
    pub fn num_ret(&self) -> i64 {
        self.rel_list.len() as i64
    }

    /// Judged levels > 0 in decreasing order, one entry per judgement: the ideal ranking.
    pub fn ideal_grades(&self) -> &[f64] {
        &self.ideal
    }
}

/// A judged document.
#[derive(Clone, Copy, Debug)]
struct JudgedDoc<'a> {
    doc: &'a str,
    rel: i64,
    /// Where the judgement is (a line number, or a byte offset in the qrels text).
    loc: usize,
}

/// Judgements of one query, in input order (a document judged twice is refused
/// when the query is evaluated).
#[derive(Clone, Copy)]
struct Judged<'s, 'a> {
    qid: &'a str,
    docs: &'s [JudgedDoc<'a>],
}

/// An input named in error messages; locations are line numbers, byte offsets into `text`, or 1-based rows
/// of columns whose file lines are `lines`.
#[derive(Clone, Copy)]
struct Origin<'t> {
    path: &'t str,
    text: Option<&'t str>,
    /// The file line of each row, for columns read from a file (their locations are rows).
    lines: Option<&'t [usize]>,
    /// How the messages show its ids.
    shown: Shown,
}

impl Origin<'_> {
    fn line(&self, loc: usize) -> usize {
        match (self.text, self.lines) {
            (Some(t), _) => stream::line_of(t, loc),
            // Lengths are checked before evaluating; a row beyond them (never expected) keeps its row number.
            (None, Some(lines)) => loc.checked_sub(1).and_then(|row| lines.get(row)).copied().unwrap_or(loc),
            (None, None) => loc,
        }
    }
}

fn doc_hash(doc: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(doc.as_bytes());
    h.finish()
}

/// Group qrels rows by query, sorted by query id (as trec_eval).
fn group_qrels<'a>(rows: &[QrelsRow<'a>]) -> Vec<(&'a str, Vec<JudgedDoc<'a>>)> {
    let mut index: FxHashMap<&'a str, usize> = FxHashMap::default();
    let mut groups: Vec<(&'a str, Vec<JudgedDoc<'a>>)> = Vec::new();
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
        groups[g].1.push(JudgedDoc { doc: row.docno, rel: row.rel, loc: row.line });
    }
    groups.par_sort_unstable_by(|a, b| a.0.cmp(b.0));
    groups
}

/// Sort a ranking as trec_eval does: score descending, then document id descending.
fn rank(entries: &mut [Entry<'_>]) {
    entries.sort_unstable_by(|a, b| a.key.cmp(&b.key).then_with(|| b.doc.cmp(a.doc)));
}

/// A ranked document with its judgement.
#[derive(Clone, Copy, Debug)]
struct Entry<'a> {
    /// Sorts ascending as the score descends; equal scores (0.0 and -0.0 too) give equal keys.
    key: u64,
    doc: &'a str,
    rel: i64,
}

fn descending_key(score: f64) -> u64 {
    let bits = (score + 0.0).to_bits();
    let ascending = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    !ascending
}

/// An open-addressing table of one query's documents: its judgements, then each
/// ranked document (to find its judgement and refuse a document judged or ranked
/// twice). Reused across queries: a generation number marks the live slots, so
/// neither clearing nor evaluating a query touches the allocator.
#[derive(Default)]
struct DocTable<'a> {
    slots: Vec<Slot<'a>>,
    generation: u32,
}

#[derive(Clone, Copy, Default)]
struct Slot<'a> {
    /// Live when equal to the table's generation.
    generation: u32,
    key: u64,
    doc: &'a str,
    rel: i64,
    /// Where the document was judged and ranked (usize::MAX: not yet).
    judged_at: usize,
    ranked_at: usize,
}

/// A document id as a u64: its bytes themselves when it is at most 8 bytes long
/// (two overlapping 4-byte reads and the length determine it, so equal keys mean
/// equal ids), else a hash of all its bytes.
#[inline(always)]
fn doc_key(doc: &str) -> (u64, bool) {
    let b = doc.as_bytes();
    let n = b.len();
    let short = match n {
        0 => 0,
        1..=3 => u64::from(b[0]) | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1]) << 16,
        4..=8 => u64::from(word32(b, 0)) | u64::from(word32(b, n - 4)) << 32,
        _ => return (doc_hash(doc) ^ n as u64, false),
    };
    // The length goes into bits the short encodings leave free (or nearly: 4..=8
    // bytes use all 64, so the length is compared separately for them).
    (short ^ (n as u64).rotate_right(8), true)
}

impl<'a> DocTable<'a> {
    /// Empty the table, with room for `capacity` documents.
    fn reset(&mut self, capacity: usize) {
        let size = (capacity * 2).next_power_of_two().max(64);
        self.generation = self.generation.wrapping_add(1);
        if self.slots.len() < size || self.generation == 0 {
            self.slots = vec![Slot::default(); size.max(self.slots.len())];
            self.generation = 1;
        }
    }

    /// The slot of `doc`, filled with judgement `rel` if `doc` is new.
    #[inline(always)]
    fn find_or_insert(&mut self, doc: &'a str, rel: i64) -> &mut Slot<'a> {
        let (key, exact) = doc_key(doc);
        let mask = self.slots.len() - 1;
        let mut at = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask;
        loop {
            let slot = &self.slots[at];
            if slot.generation != self.generation {
                break;
            }
            if slot.key == key && slot.doc.len() == doc.len() && (exact || same_bytes(slot.doc.as_bytes(), doc.as_bytes())) {
                return &mut self.slots[at];
            }
            at = (at + 1) & mask;
        }
        let generation = self.generation;
        let slot = &mut self.slots[at];
        *slot = Slot { generation, key, doc, rel, judged_at: usize::MAX, ranked_at: usize::MAX };
        slot
    }
}

#[inline(always)]
fn word32(x: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([x[i], x[i + 1], x[i + 2], x[i + 3]])
}

/// Equality of two byte strings; ids of at most 8 bytes (the usual case) are
/// compared with two overlapping 4-byte reads instead of a call to `memcmp`.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=8 => word32(a, 0) == word32(b, 0) && word32(a, n - 4) == word32(b, n - 4),
        _ => a == b,
    }
}

/// Reusable buffers for evaluating one query after another.
#[derive(Default)]
struct Scratch<'a> {
    ranking: Vec<Ranked<'a>>,
    table: DocTable<'a>,
    entries: Vec<Entry<'a>>,
    res_rels: ResRels,
    /// A query's judgements, when they are read as it is evaluated.
    judgements: Vec<JudgedDoc<'a>>,
}

/// Judge each ranked document, refuse a document judged or ranked twice (naming
/// both lines) and rank as trec_eval does.
fn judge_and_rank<'a>(judged: &Judged<'_, 'a>, scratch: &mut Scratch<'a>, qrels: Origin<'_>, run: Origin<'_>) -> Result<()> {
    let Scratch { ranking, table, entries, .. } = scratch;
    table.reset(judged.docs.len() + ranking.len());
    for d in judged.docs {
        if d.rel > MAX_GRADE {
            let msg = format!(
                "relevance {} is above {MAX_GRADE}, the largest grade ragmeter evaluates (measures count the judgements \
                 at every grade from 0 to the highest)",
                d.rel
            );
            return Err(Error::parse(qrels.path, qrels.line(d.loc), msg));
        }
        let slot = table.find_or_insert(d.doc, if d.rel < 0 { RELVALUE_UNJUDGED } else { d.rel });
        if slot.judged_at != usize::MAX {
            let first = qrels.line(slot.judged_at);
            let (doc, qid) = (qrels.shown.id(d.doc), qrels.shown.id(judged.qid));
            let msg = format!("document {doc} is judged twice for query {qid} (first at line {first})");
            return Err(Error::parse(qrels.path, qrels.line(d.loc), msg));
        }
        slot.judged_at = d.loc;
    }
    entries.clear();
    for &(doc, score, loc) in ranking.iter() {
        let slot = table.find_or_insert(doc, RELVALUE_NONPOOL);
        let first = slot.ranked_at;
        if first != usize::MAX {
            let (first, second) = (first.min(loc), first.max(loc));
            // The query as the run, which this line is in, shows its ids (it has the qrels' characters).
            let (doc, qid) = (run.shown.id(doc), run.shown.id(judged.qid));
            return Err(Error::parse(
                run.path,
                run.line(second),
                format!("document {doc} appears twice in the ranking of query {qid} (first at line {})", run.line(first)),
            ));
        }
        slot.ranked_at = loc;
        entries.push(Entry { key: descending_key(score), doc, rel: slot.rel });
    }
    rank(entries);
    Ok(())
}

/// Fill `rr` (its buffers reused) with the judged ranking of one query.
fn form_res_rels(rr: &mut ResRels, judged: &Judged<'_, '_>, ranking: &[Entry<'_>], opts: &Options) {
    let n = opts.max_docs_per_query.map_or(ranking.len(), |m| m.min(ranking.len()));
    let max_rel = judged.docs.iter().map(|d| d.rel).max().unwrap_or(0).max(0) as usize;
    rr.rel_levels.clear();
    rr.rel_levels.resize(max_rel + 1, 0);
    for d in judged.docs {
        if d.rel >= 0 {
            rr.rel_levels[d.rel as usize] += 1;
        }
    }
    (rr.num_rel_ret, rr.num_nonpool, rr.num_unjudged_in_pool, rr.num_rel, rr.num_rel_levels) = (0, 0, 0, 0, 0);
    rr.rel_list.clear();
    rr.grades.clear();
    for e in &ranking[..n] {
        let rel = e.rel;
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
        rr.grades.push(rel as f64);
    }
    for (level, &count) in rr.rel_levels.iter().enumerate() {
        if count > 0 {
            rr.num_rel_levels = level + 1;
            if level as i64 >= opts.relevance_level {
                rr.num_rel += count;
            }
        }
    }
    rr.ideal.clear();
    for level in (1..rr.num_rel_levels).rev() {
        rr.ideal.extend(std::iter::repeat_n(level as f64, rr.rel_levels[level].max(0) as usize));
    }
}

/// Per-query values of one query.
#[derive(Clone, Debug, Default)]
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
    let groups = group_qrels(qrels);
    let judged: Vec<Judged<'_, '_>> = groups.iter().map(|(qid, docs)| Judged { qid, docs }).collect();
    let run_id = run.last().map_or("", |r| r.run_id).to_string();
    // Row ranges of each query; rows usually come grouped, so one map update per block.
    let mut rankings: FxHashMap<&str, Vec<(usize, usize)>> = FxHashMap::default();
    let mut start = 0;
    for i in 1..=run.len() {
        if i == run.len() || !same_bytes(run[i].qid.as_bytes(), run[start].qid.as_bytes()) {
            rankings.entry(run[start].qid).or_default().push((start, i));
            start = i;
        }
    }
    let judged_qids: FxHashSet<&str> = judged.iter().map(|j| j.qid).collect();
    let mut run_only_queries: Vec<String> =
        rankings.keys().filter(|q| !judged_qids.contains(*q)).map(|q| q.to_string()).collect();
    run_only_queries.sort_unstable();
    if !opts.complete {
        if let Some(j) = judged.iter().find(|j| !rankings.contains_key(j.qid)) {
            return Err(missing_query_error(run_path, j.qid, qrels_path, Shown::Text, ""));
        }
    }
    let width: usize = measures.iter().map(|m| m.names.len()).sum();
    let origins = (
        Origin { path: qrels_path, text: None, lines: None, shown: Shown::Text },
        Origin { path: run_path, text: None, lines: None, shown: Shown::Text },
    );
    let queries = evaluate_judged(&judged, &measures, width, opts, origins, |j, ranking| {
        let blocks = rankings.get(judged[j].qid);
        for &(a, b) in blocks.into_iter().flatten() {
            ranking.extend(run[a..b].iter().map(|r| (r.docno, r.score, r.line)));
        }
        blocks.is_some()
    })?;
    let summary = summarize(&measures, &queries, positive(&judged), opts, width);
    Ok(Evaluation { measures, queries, summary, run_id, run_only_queries })
}

/// Evaluate every judged query on the ranking `fill(j, ranking)` appends for it
/// (`false`: query `j` is missing from the run, and trec_eval's stand-in ranking is used).
fn evaluate_judged<'a>(
    judged: &[Judged<'_, 'a>],
    measures: &[Measure],
    width: usize,
    opts: &Options,
    (qrels, run): (Origin<'_>, Origin<'_>),
    fill: impl Fn(usize, &mut Vec<Ranked<'a>>) -> bool + Sync,
) -> Result<Vec<QueryResult>> {
    check_values(judged.len(), width)?;
    judged
        .par_iter()
        .enumerate()
        .map_init(Scratch::default, |scratch, (j, judged)| {
            scratch.ranking.clear();
            let present = fill(j, &mut scratch.ranking);
            if !present {
                scratch.ranking.push((MISSING_STAND_IN, 1.0, 0));
            }
            judge_and_rank(judged, scratch, qrels, run)?;
            Ok(evaluate_query(&mut scratch.res_rels, judged, &scratch.entries, !present, measures, width, opts))
        })
        // Collected whole first, so the error reported is the first in query order.
        .collect::<Vec<Result<QueryResult>>>()
        .into_iter()
        .collect()
}

/// Evaluate the texts of a qrels file and a run file (the fast path of `ragmeter trec`). Errors quote
/// their fields as text; [`TrecTexts::evaluate`] evaluates files as [`read_pair`] read them.
pub fn evaluate_texts(
    qrels_text: &str,
    run_text: &str,
    measure_args: &[String],
    opts: &Options,
    qrels_path: &str,
    run_path: &str,
) -> Result<Evaluation> {
    let qrels = stream::Input { text: qrels_text, path: qrels_path, shown: Shown::Text };
    let run = stream::Input { text: run_text, path: run_path, shown: Shown::Text };
    evaluate_inputs(qrels, run, measure_args, opts)
}

impl TrecTexts {
    /// Evaluate the pair as [`evaluate_texts`] does; errors show the fields they quote as the files
    /// were read: as bytes when they were read byte for byte (see [`Shown`]).
    pub fn evaluate(&self, measure_args: &[String], opts: &Options, qrels_path: &str, run_path: &str) -> Result<Evaluation> {
        let qrels = stream::Input { text: self.qrels.as_str(), path: qrels_path, shown: self.qrels.shown() };
        let run = stream::Input { text: self.run.as_str(), path: run_path, shown: self.run.shown() };
        evaluate_inputs(qrels, run, measure_args, opts)
    }
}

fn evaluate_inputs(qrels: stream::Input<'_>, run: stream::Input<'_>, measure_args: &[String], opts: &Options) -> Result<Evaluation> {
    let measures = measures::resolve(measure_args)?;
    let judgements = stream::read_qrels(qrels)?;
    stream::evaluate_run_text(measures, &judgements, run, opts)
}

/// `qid`, judged in `qrels_path` (its ids shown as `shown` says), has no line in the run; `why` ends the
/// message when there is more to say.
fn missing_query_error(run_path: &str, qid: &str, qrels_path: &str, shown: Shown, why: &str) -> Error {
    let qid = shown.id(qid);
    Error::input(format!(
        "{run_path}: query {qid} has judgements in {qrels_path} but no ranking in the run; \
         pass -c to count such queries as empty rankings{why}"
    ))
}

/// The document and score of a run line split into `count` fields at `pos`.
#[inline(always)]
fn parse_run_fields<'a>(text: &'a str, pos: usize, f: &[(usize, usize); 6], count: usize, run: &Origin<'_>) -> Result<(&'a str, f64)> {
    if count >= 6 {
        if let Some(value) = parse::parse_score(parse::field(text, f[4])) {
            return Ok((parse::field(text, f[2]), value));
        }
    }
    Err(bad_run_line(text, pos, f, count, run))
}

#[cold]
#[inline(never)]
fn bad_run_line(text: &str, pos: usize, f: &[(usize, usize); 6], count: usize, run: &Origin<'_>) -> Error {
    let line = stream::line_of(text, pos);
    if count < 6 {
        Error::parse(run.path, line, format!("expected 6 columns (query Q0 document rank score run), found {count}"))
    } else {
        Error::parse(run.path, line, format!("score {} is not a number", run.shown.quoted(parse::field(text, f[4]))))
    }
}

fn evaluate_query(
    rr: &mut ResRels,
    judged: &Judged<'_, '_>,
    ranking: &[Entry<'_>],
    missing: bool,
    measures: &[Measure],
    width: usize,
    opts: &Options,
) -> QueryResult {
    form_res_rels(rr, judged, ranking, opts);
    let rr = &*rr;
    let mut values = vec![0.0; width];
    let mut relstring = None;
    for m in measures {
        let out = &mut values[m.offset..m.offset + m.names.len()];
        measures::compute(m, rr, opts.relevance_level, opts.num_docs_in_coll, out);
        if m.kind == Kind::Relstring {
            relstring = Some(if missing { String::new() } else { measures::relstring(m, rr) });
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

/// How many judgements are > 0.
fn positive(judged: &[Judged<'_, '_>]) -> usize {
    judged.iter().map(|j| j.docs.iter().filter(|d| d.rel > 0).count()).sum()
}

/// Means (or sums, counts) over the queries; `positive`: how many judgements are > 0.
fn summarize(measures: &[Measure], queries: &[QueryResult], positive: usize, opts: &Options, width: usize) -> Vec<f64> {
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
            Average::NumRel if opts.complete => vals[0] = positive as f64,
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
