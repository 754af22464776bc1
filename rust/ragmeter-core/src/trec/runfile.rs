//! Rankings for evaluation, from parsed rows or straight from a run file's text.
//!
//! A run file is indexed in one parallel pass that only finds each query's
//! line spans; a query's lines are parsed when that query is evaluated, so no
//! row table of the whole file is ever built (memory stays close to the file).

use memchr::memchr;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::parse::{parse_run_line, RunRow};
use crate::error::{Error, Result};

/// A ranking entry: document, score, location (a line number, or a byte offset for files).
pub type Ranked<'a> = (&'a str, f64, usize);

/// Where rankings come from.
pub trait RankingSource<'a>: Sync {
    fn contains(&self, qid: &str) -> bool;
    /// Append the query's entries (unsorted) to `out`.
    fn ranking(&self, qid: &str, out: &mut Vec<Ranked<'a>>) -> Result<()>;
    fn qids(&self) -> Vec<&'a str>;
    /// 1-based line number of a location.
    fn line(&self, loc: usize) -> usize;
    fn path(&self) -> &str;
}

/// Rankings grouped from rows (in-memory columns).
pub struct RowSource<'a> {
    map: FxHashMap<&'a str, Vec<Ranked<'a>>>,
    path: String,
}

impl<'a> RowSource<'a> {
    pub fn new(rows: &[RunRow<'a>], path: &str) -> Self {
        let mut map: FxHashMap<&'a str, Vec<Ranked<'a>>> = FxHashMap::default();
        for r in rows {
            map.entry(r.qid).or_default().push((r.docno, r.score, r.line));
        }
        RowSource { map, path: path.to_string() }
    }
}

impl<'a> RankingSource<'a> for RowSource<'a> {
    fn contains(&self, qid: &str) -> bool {
        self.map.contains_key(qid)
    }
    fn ranking(&self, qid: &str, out: &mut Vec<Ranked<'a>>) -> Result<()> {
        if let Some(v) = self.map.get(qid) {
            out.extend_from_slice(v);
        }
        Ok(())
    }
    fn qids(&self) -> Vec<&'a str> {
        self.map.keys().copied().collect()
    }
    fn line(&self, loc: usize) -> usize {
        loc
    }
    fn path(&self) -> &str {
        &self.path
    }
}

/// A run file's text indexed by query: byte spans of consecutive lines.
pub struct RunFile<'a> {
    text: &'a str,
    path: String,
    spans: FxHashMap<&'a str, Vec<(usize, usize)>>,
    pub run_id: &'a str,
}

/// First white-space separated token of a data line, or None for blank and comment lines.
fn first_token(line: &str) -> Option<&str> {
    let bytes = line.as_bytes();
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    if bytes[start] == b'#' {
        return None;
    }
    let end = bytes[start..].iter().position(|b| b.is_ascii_whitespace()).map_or(bytes.len(), |i| start + i);
    Some(&line[start..end])
}

/// Segments (qid, start, end) of consecutive lines with the same query in `text[from..to]`.
fn segments(text: &str, from: usize, to: usize) -> Vec<(&str, usize, usize)> {
    let bytes = text.as_bytes();
    let mut out: Vec<(&str, usize, usize)> = Vec::new();
    let mut pos = from;
    while pos < to {
        let end = memchr(b'\n', &bytes[pos..to]).map_or(to, |i| pos + i + 1);
        if let Some(qid) = first_token(&text[pos..end]) {
            match out.last_mut() {
                Some(last) if last.0 == qid && last.2 == pos => last.2 = end,
                _ => out.push((qid, pos, end)),
            }
        } else if let Some(last) = out.last_mut() {
            // Blank or comment lines inside a query's block do not split it.
            if last.2 == pos {
                last.2 = end;
            }
        }
        pos = end;
    }
    out
}

impl<'a> RunFile<'a> {
    /// Index `text` (one parallel pass over line starts and query ids).
    pub fn index(text: &'a str, path: &str) -> Result<RunFile<'a>> {
        let bytes = text.as_bytes();
        let pieces = (rayon::current_num_threads() * 8).max(1);
        let step = (bytes.len() / pieces).max(1 << 16);
        let mut cuts = vec![0usize];
        while let Some(&last) = cuts.last() {
            if last >= bytes.len() {
                break;
            }
            let guess = (last + step).min(bytes.len());
            let cut = if guess >= bytes.len() { bytes.len() } else { memchr(b'\n', &bytes[guess..]).map_or(bytes.len(), |i| guess + i + 1) };
            cuts.push(cut);
        }
        let parts: Vec<Vec<(&'a str, usize, usize)>> =
            cuts.par_windows(2).map(|w| segments(text, w[0], w[1])).collect();
        let mut spans: FxHashMap<&'a str, Vec<(usize, usize)>> = FxHashMap::default();
        let mut last_span: Option<(&'a str, usize)> = None;
        for (qid, start, end) in parts.into_iter().flatten() {
            let list = spans.entry(qid).or_default();
            match list.last_mut() {
                Some(prev) if prev.1 == start => prev.1 = end,
                _ => list.push((start, end)),
            }
            last_span = Some((qid, end));
        }
        let Some((_, end)) = last_span else {
            return Err(Error::parse(path, 1, "no results: the run file is empty"));
        };
        // trec_eval takes the run id of the last line read.
        let last_line_start = text[..end].trim_end_matches(['\n', '\r']).rfind('\n').map_or(0, |i| i + 1);
        let last = parse_run_line(&text[last_line_start..end], path, || line_of(text, last_line_start))?;
        Ok(RunFile { text, path: path.to_string(), spans, run_id: last.run_id })
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..offset]).count() + 1
}

impl<'a> RankingSource<'a> for RunFile<'a> {
    fn contains(&self, qid: &str) -> bool {
        self.spans.contains_key(qid)
    }
    fn ranking(&self, qid: &str, out: &mut Vec<Ranked<'a>>) -> Result<()> {
        let Some(spans) = self.spans.get(qid) else { return Ok(()) };
        let bytes = self.text.as_bytes();
        for &(from, to) in spans {
            let mut pos = from;
            while pos < to {
                let end = memchr(b'\n', &bytes[pos..to]).map_or(to, |i| pos + i + 1);
                let line = &self.text[pos..end];
                if first_token(line).is_some() {
                    let row = parse_run_line(line, &self.path, || line_of(self.text, pos))?;
                    out.push((row.docno, row.score, pos));
                }
                pos = end;
            }
        }
        Ok(())
    }
    fn qids(&self) -> Vec<&'a str> {
        self.spans.keys().copied().collect()
    }
    fn line(&self, loc: usize) -> usize {
        line_of(self.text, loc)
    }
    fn path(&self) -> &str {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_groups_interleaved_queries_and_keeps_offsets() {
        let text = "1 Q0 a 1 1.0 r\n# c\n1 Q0 b 2 0.5 r\n2 Q0 a 1 2.0 r\n1 Q0 c 3 0.1 s\n";
        let f = RunFile::index(text, "run").unwrap();
        assert_eq!(f.run_id, "s");
        let mut out = Vec::new();
        f.ranking("1", &mut out).unwrap();
        let docs: Vec<_> = out.iter().map(|r| r.0).collect();
        assert_eq!(docs, ["a", "b", "c"]);
        assert_eq!(f.line(out[2].2), 5);
        let bad = RunFile::index("1 Q0 a 1 1.0 r\n1 Q0 b 2 x r\n2 Q0 a 1 1 r\n", "run.txt").unwrap();
        let err = bad.ranking("1", &mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "run.txt:2: score \"x\" is not a number");
        assert!(RunFile::index("\n# nothing\n", "run.txt").is_err());
    }
}
