//! The file fast path of `ragmeter trec`: one sequential pass over each file,
//! cut into pieces that are read in parallel (a query's few qrels lines are read
//! once more when it is evaluated; see [`Qrels`]).
//!
//! TREC files nearly always keep a query's lines together, so while a run piece
//! is read each query is evaluated as soon as its block of lines ends, while the
//! lines are still in cache. A block that may continue in the neighbouring piece
//! (the first and the last of each piece), and every query whose lines are spread
//! over several blocks, is evaluated afterwards from all of its blocks: the result
//! never depends on the layout of the file, only the speed does.

use rayon::prelude::*;
use rustc_hash::FxHashSet;

use super::parse::{field, parse_grade, piece_bounds, split_fields};
use super::{
    evaluate_query, judge_and_rank, missing_query_error, parse_run_fields, same_bytes, summarize, Evaluation, Judged,
    JudgedDoc, Measure, Options, Origin, QueryResult, Ranked, Scratch, Shown, MISSING_STAND_IN,
};
use crate::error::{Error, Result};

/// A file's text, the path its errors name and how they show its fields.
#[derive(Clone, Copy)]
pub(super) struct Input<'t> {
    pub text: &'t str,
    pub path: &'t str,
    pub shown: Shown,
}

/// 1-based line number of a byte offset (only computed for error messages).
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..offset]).count() + 1
}

fn pieces(text: &str) -> Vec<usize> {
    piece_bounds(text.as_bytes(), rayon::current_num_threads() * 4)
}

/// Each data line of `text[from..to]` (which starts at a line start), with its
/// first `N` field spans and its field count; blank and comment lines skipped.
fn for_each_line<const N: usize>(
    text: &str,
    from: usize,
    to: usize,
    mut each: impl FnMut(usize, &[(usize, usize); N], usize) -> Result<()>,
) -> Result<()> {
    let bytes = text.as_bytes();
    let mut fields = [(0usize, 0usize); N];
    let mut pos = from;
    while pos < to {
        let (count, next) = split_fields(bytes, pos, &mut fields);
        if count > 0 && bytes[fields[0].0] != b'#' {
            each(pos, &fields, count)?;
        }
        pos = next;
    }
    Ok(())
}

/// A qrels file: every line checked once, and where the lines of each query are.
/// A query's judgements are read again from its lines when it is evaluated (a few
/// lines, still mapped) rather than kept in a table of every judgement: a fresh
/// process pays for each page it touches (about 3 µs a page here), and that table
/// was most of the memory of a run. Only queries whose lines are not all together
/// have their judgements gathered, once.
pub(super) struct Qrels<'t> {
    text: &'t str,
    path: &'t str,
    shown: Shown,
    merged: Vec<Vec<JudgedDoc<'t>>>,
    /// Per query, sorted by query id: where its judgements are.
    queries: Vec<(&'t str, Place)>,
    /// How many judgements are > 0 (trec_eval's num_rel with -c).
    positive: usize,
}

#[derive(Clone, Copy)]
enum Place {
    /// The lines `text[.0...1]`.
    Lines(usize, usize),
    Merged(usize),
}

impl<'t> Qrels<'t> {
    pub(super) fn len(&self) -> usize {
        self.queries.len()
    }

    pub(super) fn qid(&self, j: usize) -> &'t str {
        self.queries[j].0
    }

    pub(super) fn positive(&self) -> usize {
        self.positive
    }

    /// The qrels file, as error messages name it.
    fn origin(&self) -> Origin<'t> {
        Origin { path: self.path, text: Some(self.text), lines: None, shown: self.shown }
    }

    /// The judgements of query `j`: read into `buf` from its lines, or gathered already.
    fn docs<'s>(&'s self, j: usize, buf: &'s mut Vec<JudgedDoc<'t>>) -> Result<&'s [JudgedDoc<'t>]> {
        match self.queries[j].1 {
            Place::Lines(from, to) => {
                buf.clear();
                read_judgements(self.text, from, to, (self.path, self.shown), buf)?;
                Ok(buf)
            }
            Place::Merged(m) => Ok(&self.merged[m]),
        }
    }
}

/// Where an error in a qrels text is: its path, and how its fields are shown.
type Named<'p> = (&'p str, Shown);

/// The judgement on a qrels line split into `count` fields.
#[inline(always)]
fn judgement<'t>(text: &'t str, pos: usize, f: &[(usize, usize); 4], count: usize, (path, shown): Named<'_>) -> Result<JudgedDoc<'t>> {
    if count != 4 {
        let msg = format!("expected 4 columns (query iteration document relevance), found {count}");
        return Err(Error::parse(path, line_of(text, pos), msg));
    }
    let rel = field(text, f[3]);
    match parse_grade(rel) {
        Some(value) => Ok(JudgedDoc { doc: field(text, f[2]), rel: value, loc: pos }),
        None => Err(Error::parse(path, line_of(text, pos), format!("relevance {} is not an integer", shown.quoted(rel)))),
    }
}

/// Append the judgements of the lines `text[from..to]`.
fn read_judgements<'t>(text: &'t str, from: usize, to: usize, named: Named<'_>, docs: &mut Vec<JudgedDoc<'t>>) -> Result<()> {
    for_each_line::<4>(text, from, to, |pos, f, count| {
        docs.push(judgement(text, pos, f, count, named)?);
        Ok(())
    })
}

/// Read a qrels file's text: check every line and find the lines of each query.
pub(super) fn read_qrels(qrels: Input<'_>) -> Result<Qrels<'_>> {
    let Input { text, path, shown } = qrels;
    let cuts = pieces(text);
    let read: Vec<Result<QrelsPiece<'_>>> = cuts.par_windows(2).map(|w| read_qrels_piece(text, w[0], w[1], (path, shown))).collect();
    let mut blocks: Vec<(QidKey<'_>, (usize, usize))> = Vec::new();
    let mut positive = 0;
    for (piece, w) in read.into_iter().zip(cuts.windows(2)) {
        let (starts, n_positive) = piece?;
        positive += n_positive;
        let ends = starts.iter().skip(1).map(|b| b.1).chain([w[1]]);
        blocks.extend(starts.iter().zip(ends).map(|(&(qid, from), to)| (qid, (from, to))));
    }
    if blocks.is_empty() {
        return Err(Error::parse(path, 1, "no judgements: the qrels file is empty"));
    }
    // By query, then file order (what a stable sort by query gives, without its buffer).
    blocks.par_sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1 .0.cmp(&b.1 .0)));
    let mut qrels = Qrels { text, path, shown, merged: Vec::new(), queries: Vec::with_capacity(blocks.len()), positive };
    let mut i = 0;
    while i < blocks.len() {
        let key = blocks[i].0;
        // Only the following blocks are compared: reading every id once more would be a cache miss each.
        let n = 1 + blocks[i + 1..].iter().take_while(|b| b.0 == key).count();
        if n == 1 {
            let (from, to) = blocks[i].1;
            qrels.queries.push((key.qid, Place::Lines(from, to)));
        } else {
            let mut docs = Vec::new();
            for &(_, (from, to)) in &blocks[i..i + n] {
                read_judgements(text, from, to, (path, shown), &mut docs)?;
            }
            qrels.queries.push((key.qid, Place::Merged(qrels.merged.len())));
            qrels.merged.push(docs);
        }
        i += n;
    }
    Ok(qrels)
}

/// One piece of a qrels file: where each block of consecutive lines of a query
/// starts, and how many judgements are > 0.
type QrelsPiece<'t> = (Vec<(QidKey<'t>, usize)>, usize);

/// A query id with its first eight bytes as a number, taken while the line is in
/// cache: sorting and comparing many ids then rarely reads the ids themselves.
#[derive(Clone, Copy, Debug)]
struct QidKey<'t> {
    prefix: u64,
    qid: &'t str,
}

impl<'t> QidKey<'t> {
    fn new(qid: &'t str) -> Self {
        let b = qid.as_bytes();
        let mut head = [0u8; 8];
        let n = b.len().min(8);
        head[..n].copy_from_slice(&b[..n]);
        // Big-endian, zero-padded: prefixes order as the bytes do; equal ones are settled by the ids.
        QidKey { prefix: u64::from_be_bytes(head), qid }
    }
}

impl PartialEq for QidKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.prefix == other.prefix && self.qid == other.qid
    }
}

impl Eq for QidKey<'_> {}

impl PartialOrd for QidKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for QidKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.prefix.cmp(&other.prefix).then_with(|| self.qid.cmp(other.qid))
    }
}

fn read_qrels_piece<'t>(text: &'t str, from: usize, to: usize, named: Named<'_>) -> Result<QrelsPiece<'t>> {
    let (mut blocks, mut positive): QrelsPiece<'t> = (Vec::new(), 0);
    for_each_line::<4>(text, from, to, |pos, f, count| {
        positive += usize::from(judgement(text, pos, f, count, named)?.rel > 0);
        let qid = field(text, f[0]);
        if !blocks.last().is_some_and(|(q, _)| same_bytes(q.qid.as_bytes(), qid.as_bytes())) {
            blocks.push((QidKey::new(qid), pos));
        }
        Ok(())
    })?;
    Ok((blocks, positive))
}

/// A run of consecutive lines of one query in a piece of the run file; it ends
/// where the piece's next block starts, or with the piece. Kept small (16 bytes):
/// a file whose queries interleave has about one block per line.
struct Block {
    start: usize,
    /// Index of the query in the judgements, or `NONE` for a query without any.
    judged: u32,
    /// Index of the query's evaluation in its piece's results, or `NONE` when the
    /// block was not evaluated while reading.
    result: u32,
}

const NONE: u32 = u32::MAX;

/// (query, piece, block) of a block read after all pieces: 12 bytes, as an interleaved file has many.
type LateBlock = (u32, u32, u32);

/// What reading one piece of a run file gives.
struct Piece<'a> {
    end: usize,
    blocks: Vec<Block>,
    results: Vec<QueryResult>,
    /// Query ids of the blocks without judgements (repeated when a query has several).
    run_only: Vec<&'a str>,
}

impl Piece<'_> {
    /// Byte range of block `i`.
    fn span(&self, i: usize) -> (usize, usize) {
        (self.blocks[i].start, self.blocks.get(i + 1).map_or(self.end, |b| b.start))
    }
}

/// What every reader of the run file shares.
struct RunContext<'a, 'm> {
    text: &'a str,
    path: &'m str,
    shown: Shown,
    judgements: &'m Qrels<'a>,
    /// `QidKey` prefixes of the judged query ids (sorted, as the ids are).
    prefixes: Vec<u64>,
    measures: &'m [Measure],
    width: usize,
    opts: &'m Options,
}

impl<'a> RunContext<'a, '_> {
    /// The run file, as error messages name it.
    fn origin(&self) -> Origin<'_> {
        Origin { path: self.path, text: Some(self.text), lines: None, shown: self.shown }
    }

    /// Index in the judgements of a query id: a binary search on the numeric prefixes,
    /// then on the ids among equal prefixes (no hash table to build first).
    fn find(&self, qid: &str) -> Option<usize> {
        let prefix = QidKey::new(qid).prefix;
        let lo = self.prefixes.partition_point(|&p| p < prefix);
        let hi = lo + self.prefixes[lo..].partition_point(|&p| p == prefix);
        self.judgements.queries[lo..hi].binary_search_by(|j| j.0.cmp(qid)).ok().map(|i| lo + i)
    }

    /// Append the data lines of `text[from..to]` to `ranking` (one query's block).
    fn read_block(&self, from: usize, to: usize, ranking: &mut Vec<Ranked<'a>>) -> Result<()> {
        let text = self.text;
        for_each_line::<6>(text, from, to, |pos, f, count| {
            let (doc, score) = parse_run_fields(text, pos, f, count, &self.origin())?;
            ranking.push((doc, score, pos));
            Ok(())
        })
    }

    fn evaluate(&self, j: usize, scratch: &mut Scratch<'a>, missing: bool) -> Result<QueryResult> {
        // The buffer leaves the scratch space while the judgements it holds are in use.
        let mut buf = std::mem::take(&mut scratch.judgements);
        let result = self.judgements.docs(j, &mut buf).and_then(|docs| {
            let judged = Judged { qid: self.judgements.qid(j), docs };
            judge_and_rank(&judged, scratch, self.judgements.origin(), self.origin())?;
            Ok(evaluate_query(&mut scratch.res_rels, &judged, &scratch.entries, missing, self.measures, self.width, self.opts))
        });
        scratch.judgements = buf;
        result
    }

    /// Read one piece, evaluating the blocks that lie inside it.
    fn read_piece(&self, from: usize, to: usize) -> Result<Piece<'a>> {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut piece = Piece { end: to, blocks: Vec::new(), results: Vec::new(), run_only: Vec::new() };
        let mut scratch = Scratch::default();
        let mut open: Option<((usize, usize), usize)> = None;
        let mut lines = 0usize;
        for_each_line::<6>(text, from, to, |pos, f, count| {
            let (doc, score) = parse_run_fields(text, pos, f, count, &self.origin())?;
            lines += 1;
            match open {
                Some((q, _)) if same_bytes(&bytes[q.0..q.1], &bytes[f[0].0..f[0].1]) => {}
                Some((q, start)) => {
                    // Not the piece's first block, which may continue the previous piece; and
                    // not when blocks average under 4 lines: the file interleaves its queries,
                    // so each is evaluated once, from all its blocks, afterwards.
                    let interleaved = lines > 256 && piece.blocks.len() * 4 > lines;
                    let now = !piece.blocks.is_empty() && !interleaved;
                    self.close_block(&mut piece, field(text, q), start, now, &mut scratch)?;
                    open = Some((f[0], pos));
                }
                None => open = Some((f[0], pos)),
            }
            scratch.ranking.push((doc, score, pos));
            Ok(())
        })?;
        if let Some((q, start)) = open {
            // The last block may continue in the next piece.
            self.close_block(&mut piece, field(text, q), start, false, &mut scratch)?;
        }
        Ok(piece)
    }

    fn close_block(
        &self,
        piece: &mut Piece<'a>,
        qid: &'a str,
        start: usize,
        evaluate_now: bool,
        scratch: &mut Scratch<'a>,
    ) -> Result<()> {
        let judged = self.find(qid);
        let mut result = NONE;
        if let (Some(j), true) = (judged, evaluate_now) {
            result = piece.results.len() as u32;
            piece.results.push(self.evaluate(j, scratch, false)?);
        }
        scratch.ranking.clear();
        if judged.is_none() {
            piece.run_only.push(qid);
        }
        piece.blocks.push(Block { start, judged: judged.map_or(NONE, |j| j as u32), result });
        Ok(())
    }
}

/// Evaluate a run file's text against judgements (see the module documentation).
pub(super) fn evaluate_run_text<'a>(measures: Vec<Measure>, judgements: &Qrels<'a>, run: Input<'a>, opts: &Options) -> Result<Evaluation> {
    let Input { text, path, shown } = run;
    if judgements.len() >= NONE as usize {
        return Err(Error::input(format!("{}: more than {} judged queries", judgements.path, NONE - 1)));
    }
    let width: usize = measures.iter().map(|m| m.names.len()).sum();
    super::check_values(judgements.len(), width)?;
    let prefixes = judgements.queries.par_iter().map(|j| QidKey::new(j.0).prefix).collect();
    let ctx = RunContext { text, path, shown, judgements, prefixes, measures: &measures, width, opts };

    let cuts = pieces(text);
    let pieces: Vec<Result<Piece<'a>>> = cuts.par_windows(2).map(|w| ctx.read_piece(w[0], w[1])).collect();
    let pieces = pieces.into_iter().collect::<Result<Vec<_>>>()?;
    // Every line is read and checked by now, so the last one is well-formed.
    let run_id = last_run_id(text, path)?.to_string();

    let mut n_blocks = vec![0u32; judgements.len()];
    for b in pieces.iter().flat_map(|p| &p.blocks) {
        if b.judged != NONE {
            n_blocks[b.judged as usize] += 1;
        }
    }
    let run_only: FxHashSet<&str> = pieces.iter().flat_map(|p| p.run_only.iter().copied()).collect();
    if !opts.complete {
        if let Some(j) = n_blocks.iter().position(|&n| n == 0) {
            return Err(missing_query_error(path, judgements.qid(j), judgements.path, judgements.shown, ""));
        }
    }
    let queries = ctx.results(pieces, &n_blocks)?;
    let summary = summarize(&measures, &queries, judgements.positive(), opts, width);
    let mut run_only_queries: Vec<String> = run_only.into_iter().map(str::to_string).collect();
    run_only_queries.sort_unstable();
    Ok(Evaluation { measures, queries, summary, run_id, run_only_queries })
}

impl<'a> RunContext<'a, '_> {
    /// One result per judged query, in query id order: the results of queries read
    /// as a single block stand; the others are evaluated now from all their blocks
    /// (or, with `-c`, from the stand-in ranking when they have none).
    fn results(&self, mut pieces: Vec<Piece<'a>>, n_blocks: &[u32]) -> Result<Vec<QueryResult>> {
        // Every judged query gets a result (the run is refused, or with -c a query without
        // lines is evaluated as empty); empty stand-ins (no allocation) until then.
        let mut results: Vec<QueryResult> = (0..n_blocks.len()).map(|_| QueryResult::default()).collect();
        let mut late: Vec<LateBlock> = Vec::new();
        let index = |i: usize| u32::try_from(i).map_err(|_| Error::input(format!("{}: too many blocks of lines", self.path)));
        for (p, piece) in pieces.iter_mut().enumerate() {
            for (i, b) in piece.blocks.iter().enumerate() {
                match b.judged {
                    NONE => {}
                    j if b.result != NONE && n_blocks[j as usize] == 1 => {
                        results[j as usize] = std::mem::take(&mut piece.results[b.result as usize]);
                    }
                    j => late.push((j, index(p)?, index(i)?)),
                }
            }
        }
        // By query, then file order (piece, block): what a stable sort by query gives,
        // without the stable sort's buffer (an interleaved file has a block per line).
        late.par_sort_unstable();
        let mut todo: Vec<(usize, &[LateBlock])> = late.chunk_by(|a, b| a.0 == b.0).map(|c| (c[0].0 as usize, c)).collect();
        todo.extend(n_blocks.iter().enumerate().filter(|(_, &n)| n == 0).map(|(j, _)| (j, &[][..])));
        // In query order, so that the error reported is the first in query order.
        todo.sort_unstable_by_key(|t| t.0);
        let late: Vec<Result<(usize, QueryResult)>> = todo
            .into_par_iter()
            .map_init(Scratch::default, |scratch, (j, blocks)| {
                scratch.ranking.clear();
                let missing = blocks.is_empty();
                if missing {
                    scratch.ranking.push((MISSING_STAND_IN, 1.0, 0));
                }
                for &(_, p, i) in blocks {
                    let (from, to) = pieces[p as usize].span(i as usize);
                    self.read_block(from, to, &mut scratch.ranking)?;
                }
                Ok((j, self.evaluate(j, scratch, missing)?))
            })
            .collect();
        for r in late {
            let (j, result) = r?;
            results[j] = result;
        }
        Ok(results)
    }
}

/// trec_eval reports the run id of the last line it read.
fn last_run_id<'a>(text: &'a str, path: &str) -> Result<&'a str> {
    let bytes = text.as_bytes();
    let mut end = text.len();
    loop {
        let start = text[..end].rfind('\n').map_or(0, |i| i + 1);
        let mut fields = [(0usize, 0usize); 6];
        let (count, _) = split_fields(&bytes[..end], start, &mut fields);
        if count > 0 && bytes[fields[0].0] != b'#' {
            if count < 6 {
                let msg = format!("expected 6 columns (query Q0 document rank score run), found {count}");
                return Err(Error::parse(path, line_of(text, start), msg));
            }
            return Ok(&text[fields[5].0..fields[5].1]);
        }
        if start == 0 {
            return Err(Error::parse(path, 1, "no results: the run file is empty"));
        }
        end = start - 1;
    }
}
