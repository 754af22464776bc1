//! In-memory columns grouped by query: the dict-of-dicts shape pytrec_eval and
//! ranx users have (one group per query), or a table whose rows come in runs of
//! one query. Each query's ranking is read straight from the columns; no table of
//! rows is built. Errors name the input (`qrels`, `run`) and the 1-based row, or,
//! for the columns of a file, the file and its line.

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
    /// What messages call the input: `qrels` or `run`, or the path of the file the columns were read from.
    pub name: &'a str,
    /// For the columns of a file, the file line of each row: messages then name lines, not rows.
    pub lines: Option<&'a [usize]>,
    /// For the columns of a file that is not UTF-8, read byte for byte (one Latin-1 character per byte), the
    /// first line that is not UTF-8: messages show its ids as bytes, and a judged query missing because its
    /// id is not ASCII says the file was read so and how to convert it.
    pub not_utf8_line: Option<usize>,
}

impl<'a, S: Strings + ?Sized, V: Sync> Grouped<'a, S, V> {
    /// How messages show the ids: as bytes for the columns of a file read byte for byte.
    pub fn shown(&self) -> Shown {
        if self.not_utf8_line.is_some() {
            Shown::Bytes
        } else {
            Shown::Text
        }
    }

    fn check(&self, what: &str) -> Result<()> {
        let n = self.values.len();
        if self.docs.len() != n {
            return Err(Error::input(format!("{what}: {} documents but {n} values", self.docs.len())));
        }
        if let Some(lines) = self.lines.filter(|lines| lines.len() != n) {
            return Err(Error::input(format!("{what}: {} line numbers but {n} values", lines.len())));
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

    fn origin(&self) -> Origin<'a> {
        Origin { path: self.name, text: None, lines: self.lines, shown: self.shown() }
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
        return Err(Error::parse(run.name, run.origin().line(i + 1), "score is NaN"));
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
            let qid = judged[j].qid;
            let why = read_as_bytes_hint(qid, [(qrels.name, qrels.not_utf8_line), (run.name, run.not_utf8_line)]);
            return Err(missing_query_error(run.name, qid, qrels.name, qrels.shown(), &why));
        }
    }
    let width: usize = measures.iter().map(|m| m.names.len()).sum();
    let origins = (qrels.origin(), run.origin());
    let queries = evaluate_judged(&judged, &measures, width, opts, origins, |j, ranking| {
        ranking.extend(run.rows(groups_of[j]).map(|i| (run.docs.get(i), run.values[i], i + 1)));
        !groups_of[j].is_empty()
    })?;
    let summary = summarize(&measures, &queries, positive(&judged), opts, width);
    Ok(Evaluation { measures, queries, summary, run_id: run_id.to_string(), run_only_queries })
}

/// Why a judged query may be missing when an input is a file read byte for byte beside a table or dict: its
/// ids then match the other input's only as one Latin-1 character per byte, so a query that is not ASCII is
/// missing unless the table holds it so too (an ASCII one reads the same either way: no hint). `inputs`: the
/// name of each input and its first line that is not UTF-8, when it was read byte for byte.
fn read_as_bytes_hint(qid: &str, inputs: [(&str, Option<usize>); 2]) -> String {
    if qid.is_ascii() {
        return String::new();
    }
    let hint = |(name, line): (&str, Option<usize>)| {
        line.map(|line| {
            format!(
                "; {name} is not UTF-8 at line {line}, so its ids were read one character per byte (Latin-1) and \
                 match the other input's only as those characters: convert the file to UTF-8 \
                 (iconv -f ENCODING -t utf-8) to match its ids as text"
            )
        })
    };
    inputs.into_iter().filter_map(hint).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(qrels: &Grouped<'_, [&str], i64>, run: &Grouped<'_, [&str], f64>, complete: bool) -> String {
        let opts = Options { complete, ..Options::default() };
        evaluate_grouped(qrels, run, &["map".to_string()], &opts, "r").expect_err("refused").to_string()
    }

    fn grouped<'a, V>(name: &'a str, docs: &'a [&'a str], values: &'a [V], lines: Option<&'a [usize]>) -> Grouped<'a, [&'a str], V> {
        let offsets: &'static [usize] = match docs.len() {
            1 => &[0, 1],
            2 => &[0, 2],
            _ => &[0, 3],
        };
        Grouped { qids: vec!["q1"], offsets, docs, values, name, lines, not_utf8_line: None }
    }

    #[test]
    fn the_columns_of_a_file_are_named_by_its_path_and_lines() {
        let docs = ["d1", "d2", "d1"];
        let lines = [2, 5, 9];
        let qrels = grouped("q.txt", &docs, &[1i64, 0, 1], Some(&lines));
        let run = grouped("run", &docs[..1], &[0.5], None);
        assert_eq!(err(&qrels, &run, false), "q.txt:9: document d1 is judged twice for query q1 (first at line 2)");
        let qrels = grouped("q.txt", &docs[..1], &[1i64], Some(&lines[..1]));
        let run = grouped("r.txt", &docs, &[0.5, 0.4, 0.3], Some(&lines));
        assert_eq!(err(&qrels, &run, false), "r.txt:9: document d1 appears twice in the ranking of query q1 (first at line 2)");
        let run = Grouped { qids: vec!["q2"], ..run };
        assert!(err(&qrels, &run, false).starts_with("r.txt: query q1 has judgements in q.txt but no ranking"));
    }

    #[test]
    fn a_query_missing_beside_a_file_read_as_bytes_says_why_when_its_id_is_not_ascii() {
        let docs = ["d1"];
        let lines = [4];
        let qrels = Grouped { qids: vec!["\u{8e}\u{bf}"], not_utf8_line: Some(4), ..grouped("q.txt", &docs, &[1i64], Some(&lines)) };
        let run = Grouped { qids: vec!["q2"], ..grouped("run", &docs, &[0.5], None) };
        assert_eq!(
            err(&qrels, &run, false),
            "run: query \\x8e\\xbf has judgements in q.txt but no ranking in the run; pass -c to count such queries as \
             empty rankings; q.txt is not UTF-8 at line 4, so its ids were read one character per byte (Latin-1) and \
             match the other input's only as those characters: convert the file to UTF-8 (iconv -f ENCODING -t utf-8) \
             to match its ids as text"
        );
        // a dict's non-ASCII query missing from a run file read as bytes: the hint names the run file
        let qrels = Grouped { qids: vec!["東"], ..grouped("qrels", &docs, &[1i64], None) };
        let run = Grouped { not_utf8_line: Some(7), ..run };
        assert!(err(&qrels, &run, false).ends_with("; run is not UTF-8 at line 7, so its ids were read one character per \
             byte (Latin-1) and match the other input's only as those characters: convert the file to UTF-8 (iconv -f \
             ENCODING -t utf-8) to match its ids as text"));
        // an ASCII query is missing whatever the encoding, and nothing read as bytes gives no hint
        let qrels = Grouped { qids: vec!["q1"], not_utf8_line: Some(4), ..grouped("q.txt", &docs, &[1i64], None) };
        assert!(err(&qrels, &run, false).ends_with("pass -c to count such queries as empty rankings"));
        let qrels = Grouped { qids: vec!["東"], ..grouped("qrels", &docs, &[1i64], None) };
        let run = Grouped { not_utf8_line: None, ..run };
        assert!(err(&qrels, &run, false).ends_with("pass -c to count such queries as empty rankings"));
    }

    #[test]
    fn line_numbers_not_one_per_row_are_refused_not_indexed() {
        let docs = ["d1", "d2"];
        let qrels = grouped("q.txt", &docs, &[1i64, 1], Some(&[1]));
        let run = grouped("run", &docs, &[0.5, 0.5], None);
        assert_eq!(err(&qrels, &run, true), "qrels: 1 line numbers but 2 values");
    }
}
