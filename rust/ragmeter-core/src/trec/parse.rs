//! TREC qrels and run files, parsed into borrowed rows.
//!
//! Leniency matches trec_eval where it is harmless (lines starting with `#` are
//! comments, blank lines are skipped, any ASCII white space separates columns).
//! Where trec_eval silently reads garbage (`atol("x")` is 0), we stop with
//! `file:line: what is wrong`.

use crate::error::{Error, Result};

/// One judgement: `qid iter docno rel`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QrelsRow<'a> {
    pub qid: &'a str,
    pub docno: &'a str,
    pub rel: i64,
    pub line: usize,
}

/// One retrieved document: `qid Q0 docno rank score run_id`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunRow<'a> {
    pub qid: &'a str,
    pub docno: &'a str,
    pub score: f64,
    pub run_id: &'a str,
    pub line: usize,
}

/// Iterate over the non-comment, non-blank lines with their 1-based numbers.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n').enumerate().filter_map(|(i, line)| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start_matches(|c: char| c.is_ascii_whitespace());
        if trimmed.is_empty() || line.starts_with('#') || trimmed.starts_with('#') {
            None
        } else {
            Some((i + 1, line))
        }
    })
}

/// The first `N` fields of a line; exactly `N` unless `extra_ok` (trec_eval
/// ignores anything after a run line's sixth column).
fn fields<const N: usize>(line: &str, extra_ok: bool) -> std::result::Result<[&str; N], usize> {
    // Byte-level split on ASCII white space: the hot loop of parsing a run file.
    let bytes = line.as_bytes();
    let mut out = [""; N];
    let mut count = 0;
    let mut start: Option<usize> = None;
    for (i, &b) in bytes.iter().enumerate() {
        let space = SPACE[b as usize];
        match (start, space) {
            (None, false) => start = Some(i),
            (Some(s0), true) => {
                if count < N {
                    // Cut at ASCII bytes only, so both ends are char boundaries.
                    out[count] = &line[s0..i];
                } else if extra_ok {
                    return Ok(out);
                }
                count += 1;
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s0) = start {
        if count < N {
            out[count] = &line[s0..];
        }
        count += 1;
    }
    if count == N || (extra_ok && count > N) {
        Ok(out)
    } else {
        Err(count)
    }
}

/// ASCII white space as C's `isspace` sees it (space, \t, \n, \v, \f, \r).
const SPACE: [bool; 256] = {
    let mut t = [false; 256];
    t[b' ' as usize] = true;
    t[b'\t' as usize] = true;
    t[b'\n' as usize] = true;
    t[0x0b] = true;
    t[0x0c] = true;
    t[b'\r' as usize] = true;
    t
};

/// Parse a qrels file's text. `path` only labels error messages.
pub fn parse_qrels<'a>(text: &'a str, path: &str) -> Result<Vec<QrelsRow<'a>>> {
    let mut rows = Vec::with_capacity(text.len() / 24);
    for (line_no, line) in data_lines(text) {
        let [qid, _iter, docno, rel] = fields::<4>(line, false).map_err(|n| {
            Error::parse(path, line_no, format!("expected 4 columns (query iteration document relevance), found {n}"))
        })?;
        let rel = rel.parse::<i64>().map_err(|_| {
            Error::parse(path, line_no, format!("relevance {rel:?} is not an integer"))
        })?;
        rows.push(QrelsRow { qid, docno, rel, line: line_no });
    }
    if rows.is_empty() {
        return Err(Error::parse(path, 1, "no judgements: the qrels file is empty"));
    }
    Ok(rows)
}

/// Parse a run file's text. `path` only labels error messages.
pub fn parse_run<'a>(text: &'a str, path: &str) -> Result<Vec<RunRow<'a>>> {
    let mut rows = Vec::with_capacity(text.len() / 30);
    for (line_no, line) in data_lines(text) {
        let mut row = parse_run_line(line, path, || line_no)?;
        row.line = line_no;
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(Error::parse(path, 1, "no results: the run file is empty"));
    }
    Ok(rows)
}

/// Parse one data line of a run; `line_no` is called only to report an error.
pub fn parse_run_line<'a>(line: &'a str, path: &str, line_no: impl FnOnce() -> usize) -> Result<RunRow<'a>> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let [qid, _q0, docno, _rank, score, run_id] = match fields::<6>(line, true) {
        Ok(f) => f,
        Err(n) => {
            return Err(Error::parse(path, line_no(), format!("expected 6 columns (query Q0 document rank score run), found {n}")))
        }
    };
    let Some(score_value) = parse_score(score) else {
        return Err(Error::parse(path, line_no(), format!("score {score:?} is not a number")));
    };
    Ok(RunRow { qid, docno, score: score_value, run_id, line: 0 })
}

fn parse_score(s: &str) -> Option<f64> {
    let v = s.parse::<f64>().ok()?;
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// Read a whole file as UTF-8 text, naming the file in any error.
pub fn read_text(path: &str) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.to_string(), message: io_message(&e) })?;
    String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        Error::parse(path, line, "not valid UTF-8 text")
    })
}

/// A file's text, memory-mapped (no copy, no zeroed buffer) and checked to be UTF-8.
pub struct FileText {
    map: Option<memmap2::Mmap>,
}

impl FileText {
    pub fn open(path: &str) -> Result<FileText> {
        let io = |e: std::io::Error| Error::Io { path: path.to_string(), message: io_message(&e) };
        let file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(Error::Io { path: path.to_string(), message: "is a directory".to_string() });
        }
        if meta.len() == 0 {
            return Ok(FileText { map: None });
        }
        // SAFETY: the map is read-only and lives as long as the borrow of its text; a file
        // truncated by another process while we read it is outside what we guard against,
        // as with every tool that maps its inputs.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        if let Err(e) = std::str::from_utf8(&map) {
            let line = map[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
            return Err(Error::parse(path, line, "not valid UTF-8 text"));
        }
        Ok(FileText { map: Some(map) })
    }

    pub fn as_str(&self) -> &str {
        match &self.map {
            // Validated as UTF-8 in `open`.
            Some(m) => std::str::from_utf8(m).unwrap_or(""),
            None => "",
        }
    }
}

fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => format!("cannot read: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qrels_comments_and_errors() {
        let rows = parse_qrels("# c\n1 0 d1 2\n\n1 0 d2 0\n", "q").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1], QrelsRow { qid: "1", docno: "d2", rel: 0, line: 4 });
        let err = parse_qrels("1 0 d1 2\n1 0 d2\n", "q.txt").unwrap_err();
        assert_eq!(err.to_string(), "q.txt:2: expected 4 columns (query iteration document relevance), found 3");
        let err = parse_qrels("1 0 d1 x\n", "q.txt").unwrap_err();
        assert_eq!(err.to_string(), "q.txt:1: relevance \"x\" is not an integer");
        assert!(parse_qrels("\n# only comments\n", "q.txt").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn run_rows_and_errors() {
        let rows = parse_run("1 Q0 d1 1 2.5 r\r\n1\tQ0\td2\t2\t-1e-3\tr\n", "r").unwrap();
        assert_eq!(rows[1].score, -1e-3);
        assert_eq!(rows[0].run_id, "r");
        let err = parse_run("1 Q0 d1 1 abc r\n", "run.txt").unwrap_err();
        assert_eq!(err.to_string(), "run.txt:1: score \"abc\" is not a number");
        let err = parse_run("1 Q0 d1 1 2\n", "run.txt").unwrap_err();
        assert!(err.to_string().starts_with("run.txt:1: expected 6 columns"));
        assert_eq!(parse_run("1 Q0 d1 1 2 r junk at end\n", "run.txt").unwrap()[0].run_id, "r");
    }
}
