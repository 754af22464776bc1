//! TREC qrels and run files, parsed into borrowed rows.
//!
//! Leniency matches trec_eval where it is harmless (lines starting with `#` are
//! comments, blank lines are skipped, any ASCII white space separates columns).
//! Where trec_eval silently reads garbage (`atol("x")` is 0), we stop with
//! `file:line: what is wrong`.

use rayon::prelude::*;

use super::shown::Shown;
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
        let trimmed = line.trim_start_matches(|c: char| c.is_ascii() && is_space(c as u8));
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
    let mut spans = [(0usize, 0usize); N];
    let (count, _) = split_fields(line.as_bytes(), 0, &mut spans);
    if count == N || (extra_ok && count > N) {
        // Cuts fall on ASCII bytes only, so both ends are char boundaries.
        Ok(spans.map(|(s, e)| &line[s..e]))
    } else {
        Err(count)
    }
}

/// C's `isspace` (space, \t, \n, \v, \f, \r): one compare for every printable byte.
#[inline(always)]
pub(crate) fn is_space(b: u8) -> bool {
    b <= b' ' && (b == b' ' || (b'\t'..=b'\r').contains(&b))
}

/// Split the line that starts at `pos` into white-space separated fields: the first
/// `N` field spans go to `out`; returns the number of fields and where the next
/// line starts. The hot loop of reading TREC files: lines shorter than 64 bytes are
/// classified 16 bytes at a time and their fields read off a bit mask.
#[inline]
pub(crate) fn split_fields<const N: usize>(bytes: &[u8], pos: usize, out: &mut [(usize, usize); N]) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(done) = split_short_line(bytes, pos, out) {
        return done;
    }
    split_fields_scalar(bytes, pos, out)
}

/// The text of a field span returned by [`split_fields`] for `text`.
#[inline(always)]
pub(crate) fn field(text: &str, span: (usize, usize)) -> &str {
    debug_assert!(span.0 <= span.1 && text.is_char_boundary(span.0) && text.is_char_boundary(span.1));
    // SAFETY: `split_fields` cuts next to ASCII white space, at a line start or at the
    // end of the text, all of them char boundaries in bounds (checked in debug builds).
    unsafe { text.get_unchecked(span.0..span.1) }
}

/// [`split_fields`] one byte at a time (long lines, the end of the text, other CPUs).
pub(crate) fn split_fields_scalar<const N: usize>(bytes: &[u8], mut pos: usize, out: &mut [(usize, usize); N]) -> (usize, usize) {
    let end = bytes.len();
    let mut count = 0;
    loop {
        while pos < end && is_space(bytes[pos]) {
            if bytes[pos] == b'\n' {
                return (count, pos + 1);
            }
            pos += 1;
        }
        if pos >= end {
            return (count, end);
        }
        let start = pos;
        while pos < end && !is_space(bytes[pos]) {
            pos += 1;
        }
        if count < N {
            out[count] = (start, pos);
        }
        count += 1;
    }
}

/// The line at `pos` split with SSE2 masks, or `None` when its newline is not
/// within 64 bytes or fewer than 64 bytes remain.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn split_short_line<const N: usize>(bytes: &[u8], pos: usize, out: &mut [(usize, usize); N]) -> Option<(usize, usize)> {
    let window = bytes.get(pos..pos + 64)?;
    let mut space: u64 = 0;
    let mut line_len = None;
    for (i, block) in window.chunks_exact(16).enumerate() {
        let (s, nl) = sse2::masks(block);
        space |= u64::from(s) << (16 * i);
        if nl != 0 {
            line_len = Some(16 * i + nl.trailing_zeros() as usize);
            break;
        }
    }
    let line_len = line_len?;
    let in_line = (1u64 << line_len) - 1;
    let field = !space & in_line;
    let mut starts = field & !(field << 1);
    let mut ends = field & !(field >> 1);
    let next = pos + line_len + 1;
    // The first `N` fields one set bit at a time, in a loop the compiler unrolls.
    for (k, span) in out.iter_mut().enumerate() {
        if starts == 0 {
            return Some((k, next));
        }
        *span = (pos + starts.trailing_zeros() as usize, pos + ends.trailing_zeros() as usize + 1);
        starts &= starts - 1;
        ends &= ends - 1;
    }
    // Fields beyond the `N`th are only counted (no popcount: it is not in baseline x86-64).
    let mut count = N;
    while starts != 0 {
        starts &= starts - 1;
        count += 1;
    }
    Some((count, next))
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;

    /// Bit masks of the C `isspace` bytes and of the newlines in a 16-byte block.
    #[inline(always)]
    pub fn masks(block: &[u8]) -> (u16, u16) {
        assert!(block.len() >= 16);
        // SAFETY: SSE2 is part of x86_64; the load reads 16 bytes of `block`, checked above.
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr() as *const __m128i);
            let blank = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
            // \t \n \v \f \r are 9..=13: v - 9 (wrapping) is at most 4 exactly for them.
            let t = _mm_sub_epi8(v, _mm_set1_epi8(9));
            let control = _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(4)), t);
            let newline = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8));
            (_mm_movemask_epi8(_mm_or_si128(blank, control)) as u16, _mm_movemask_epi8(newline) as u16)
        }
    }
}

/// Parse a qrels file's text. `path` only labels error messages.
pub fn parse_qrels<'a>(text: &'a str, path: &str) -> Result<Vec<QrelsRow<'a>>> {
    qrels_rows(text, path, Shown::Text)
}

/// [`parse_qrels`], error messages showing fields as `shown` says.
fn qrels_rows<'a>(text: &'a str, path: &str, shown: Shown) -> Result<Vec<QrelsRow<'a>>> {
    let mut rows = Vec::with_capacity(text.len() / 24);
    for (line_no, line) in data_lines(text) {
        let [qid, _iter, docno, rel] = fields::<4>(line, false).map_err(|n| {
            Error::parse(path, line_no, format!("expected 4 columns (query iteration document relevance), found {n}"))
        })?;
        let rel = parse_grade(rel).ok_or_else(|| {
            Error::parse(path, line_no, format!("relevance {} is not an integer", shown.quoted(rel)))
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
    run_rows(text, path, Shown::Text)
}

/// [`parse_run`], error messages showing fields as `shown` says.
fn run_rows<'a>(text: &'a str, path: &str, shown: Shown) -> Result<Vec<RunRow<'a>>> {
    let mut rows = Vec::with_capacity(text.len() / 30);
    for (line_no, line) in data_lines(text) {
        let mut row = run_line(line, path, shown, || line_no)?;
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
    run_line(line, path, Shown::Text, line_no)
}

fn run_line<'a>(line: &'a str, path: &str, shown: Shown, line_no: impl FnOnce() -> usize) -> Result<RunRow<'a>> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let [qid, _q0, docno, _rank, score, run_id] = match fields::<6>(line, true) {
        Ok(f) => f,
        Err(n) => {
            return Err(Error::parse(path, line_no(), format!("expected 6 columns (query Q0 document rank score run), found {n}")))
        }
    };
    let Some(score_value) = parse_score(score) else {
        return Err(Error::parse(path, line_no(), format!("score {} is not a number", shown.quoted(score))));
    };
    Ok(RunRow { qid, docno, score: score_value, run_id, line: 0 })
}

/// A relevance grade: an integer, as `str::parse::<i64>` reads it (one digit, the
/// usual case, without the call).
#[inline(always)]
pub(crate) fn parse_grade(s: &str) -> Option<i64> {
    match s.as_bytes() {
        &[d] if d.is_ascii_digit() => Some(i64::from(d - b'0')),
        _ => s.parse::<i64>().ok().or_else(|| whole_decimal_grade(s)),
    }
}

/// A grade written as a decimal with no fraction (`1.0`, `2.`), as exports from
/// tables and dataframes write integers: trec_eval (`atol`) reads it as the integer,
/// and so do ragmeter's qrels tables. A fraction (`0.5`) is refused, not truncated.
#[cold]
fn whole_decimal_grade(s: &str) -> Option<i64> {
    let (whole, fraction) = s.split_once('.')?;
    let has_digit = whole.bytes().any(|b| b.is_ascii_digit());
    if !has_digit || !fraction.bytes().all(|b| b == b'0') {
        return None;
    }
    whole.parse::<i64>().ok()
}

#[inline(always)]
pub(crate) fn parse_score(s: &str) -> Option<f64> {
    match plain_decimal(s.as_bytes()) {
        Some(v) => Some(v),
        None => parse_score_slow(s),
    }
}

#[cold]
#[inline(never)]
fn parse_score_slow(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| !v.is_nan())
}

/// The value of a plain decimal (`[+-]digits[.digits]`, at most 19 characters) whose
/// digits fit in 2^53. The integer and the power of ten are exact doubles, so one IEEE
/// division rounds correctly and agrees with `str::parse` bit for bit (Clinger's fast
/// path). `None` for anything else, which `str::parse` then reads.
#[inline(always)]
fn plain_decimal(b: &[u8]) -> Option<f64> {
    const POW10: [f64; 20] =
        [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19];
    let n = b.len();
    // 19 characters hold at most 19 digits, which cannot overflow a u64.
    if n == 0 || n > 19 {
        return None;
    }
    let (negative, start) = match b[0] {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let (mut mantissa, mut i) = scalar_digits(b, start, 0);
    let mut n_digits = i - start;
    let mut frac = 0;
    if i < n && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        // Long fractions (the usual case for scores) take eight digits in one go.
        if let Some(eight) = b.get(i..i + 8).and_then(eight_digits) {
            mantissa = mantissa * 100_000_000 + u64::from(eight);
            i += 8;
        }
        (mantissa, i) = scalar_digits(b, i, mantissa);
        frac = i - frac_start;
        n_digits += frac;
    }
    if i != n || n_digits == 0 || mantissa > (1u64 << 53) {
        return None;
    }
    let v = mantissa as f64 / POW10[frac];
    Some(if negative { -v } else { v })
}

/// Fold the decimal digits of `b` from `i` into `acc`: (new value, end of the digits).
#[inline(always)]
fn scalar_digits(b: &[u8], mut i: usize, mut acc: u64) -> (u64, usize) {
    while let Some(&c) = b.get(i) {
        let digit = c.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        acc = acc * 10 + u64::from(digit);
        i += 1;
    }
    (acc, i)
}

/// The value of eight ASCII digits, or `None` if any byte is not a digit (SWAR:
/// three multiplications instead of a chain of eight).
#[inline(always)]
fn eight_digits(chunk: &[u8]) -> Option<u32> {
    let word = u64::from_le_bytes(chunk.try_into().ok()?);
    let v = word.wrapping_sub(0x3030_3030_3030_3030);
    // A byte below '0' wraps to >= 0x80; one above '9' reaches >= 0x80 when 0x76 is added.
    if (v | v.wrapping_add(0x7676_7676_7676_7676)) & 0x8080_8080_8080_8080 != 0 {
        return None;
    }
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let mask = 0x0000_00FF_0000_00FF;
    let v = ((v & mask).wrapping_mul(100 + (1_000_000 << 32)))
        .wrapping_add(((v >> 16) & mask).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    Some(v as u32)
}

/// Read a whole file as UTF-8 text, naming the file in any error.
pub fn read_text(path: &str) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.to_string(), message: io_message(&e) })?;
    text_from_bytes(bytes, path)
}

/// `bytes` as UTF-8 text; an error names `name` and the line of the first byte that is not UTF-8.
pub fn text_from_bytes(bytes: Vec<u8>, name: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| not_utf8_error(name, line_of_byte(e.as_bytes(), e.utf8_error().valid_up_to())))
}

/// A TREC file's text: memory-mapped (no copy, no zeroed buffer) and checked to be
/// UTF-8, or held in memory (read from stdin, or its bytes as Latin-1 characters).
pub struct FileText {
    text: Text,
    /// [`Shown::Bytes`] when read byte for byte ([`FileText::latin1`]).
    shown: Shown,
}

enum Text {
    Empty,
    /// Checked to be UTF-8 when it was opened.
    Mapped(memmap2::Mmap),
    Owned(String),
}

impl FileText {
    /// A file that must be UTF-8 text (an error names the line of the first byte that is not).
    pub fn open(path: &str) -> Result<FileText> {
        let raw = Raw::open(path)?;
        utf8_or_line(raw).map_err(|(_, line)| not_utf8_error(path, line))
    }

    /// How error messages show this text's fields: as text, or as bytes when it was read byte for byte.
    pub fn shown(&self) -> Shown {
        self.shown
    }

    /// The judgements of a qrels file's text, as [`parse_qrels`] reads them; errors show its fields as [`Self::shown`].
    pub fn qrels_rows(&self, path: &str) -> Result<Vec<QrelsRow<'_>>> {
        qrels_rows(self.as_str(), path, self.shown)
    }

    /// The rows of a run file's text, as [`parse_run`] reads them; errors show its fields as [`Self::shown`].
    pub fn run_rows(&self, path: &str) -> Result<Vec<RunRow<'_>>> {
        run_rows(self.as_str(), path, self.shown)
    }

    pub fn as_str(&self) -> &str {
        match &self.text {
            Text::Empty => "",
            // SAFETY: validated as UTF-8 when it was opened (`utf8_or_line`); the map is read-only.
            Text::Mapped(m) => unsafe { std::str::from_utf8_unchecked(m) },
            Text::Owned(s) => s,
        }
    }

    /// `bytes` with each byte read as the character of that code point (Latin-1: byte
    /// 0xE9 is 'é'). Equal byte strings stay equal and `str` order is `strcmp`'s byte
    /// order, since UTF-8 keeps code point order; [`latin1_bytes`] gives the bytes back.
    fn latin1(bytes: &[u8]) -> FileText {
        FileText { text: Text::Owned(latin1_text(bytes, LATIN1_PIECE)), shown: Shown::Bytes }
    }
}

/// Bytes per piece of [`latin1_text`]: pieces are converted on all threads, each large
/// enough that the split costs nothing next to the copy.
const LATIN1_PIECE: usize = 1 << 20;

/// `bytes` as text with each byte the character of that code point: ASCII as it is,
/// 0x80-0xFF as two UTF-8 bytes. Each byte maps on its own, so the input is cut into
/// pieces of `piece` bytes anywhere and the pieces converted in parallel, each into its
/// own place of the output (no second copy).
fn latin1_text(bytes: &[u8], piece: usize) -> String {
    let high: Vec<usize> = bytes.par_chunks(piece).map(|p| p.iter().filter(|&&b| b >= 0x80).count()).collect();
    let mut out = vec![0u8; bytes.len() + high.iter().sum::<usize>()];
    let mut rest = &mut out[..];
    let mut places = Vec::with_capacity(high.len());
    for (p, h) in bytes.chunks(piece).zip(&high) {
        let (place, after) = rest.split_at_mut(p.len() + h);
        places.push(place);
        rest = after;
    }
    bytes.par_chunks(piece).zip(places.into_par_iter()).for_each(|(p, place)| latin1_piece(p, place));
    // SAFETY: every byte below 0x80 was copied as it is (one-byte UTF-8) and every other byte b
    // written as 0xC0 | b >> 6 (0xC2 or 0xC3), 0x80 | b & 0x3F: a two-byte sequence for U+0080-U+00FF.
    // The places tile `out` exactly (each one the piece's length plus its high bytes).
    unsafe { String::from_utf8_unchecked(out) }
}

/// One piece of [`latin1_text`] into `place` (exactly its converted length): blocks of ASCII copied whole.
fn latin1_piece(piece: &[u8], place: &mut [u8]) {
    let mut at = 0;
    for block in piece.chunks(64) {
        if block.is_ascii() {
            place[at..at + block.len()].copy_from_slice(block);
            at += block.len();
            continue;
        }
        for &b in block {
            if b < 0x80 {
                place[at] = b;
                at += 1;
            } else {
                place[at] = 0xC0 | (b >> 6);
                place[at + 1] = 0x80 | (b & 0x3F);
                at += 2;
            }
        }
    }
    debug_assert_eq!(at, place.len());
}

/// The bytes of text read by [`FileText::latin1`] (and of any text whose characters are
/// all below U+0100, as trec_eval's output of such files is): one byte per character.
pub fn latin1_bytes(text: &str) -> Vec<u8> {
    // Every character is below U+0100 by construction; a larger one (none) would become '?', not a panic.
    text.chars().map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?')).collect()
}

/// Where a TREC file's bytes come from.
pub enum Source<'a> {
    /// A file, mapped.
    File(&'a str),
    /// Bytes already read (trec_eval's results file `-`: stdin), with the name errors give them.
    Bytes { name: &'a str, bytes: Vec<u8> },
}

impl<'a> Source<'a> {
    fn name(&self) -> &'a str {
        match self {
            Source::File(path) => path,
            Source::Bytes { name, .. } => name,
        }
    }

    fn into_raw(self) -> Result<Raw> {
        match self {
            Source::File(path) => Raw::open(path),
            Source::Bytes { bytes, .. } => Ok(Raw::Owned(bytes)),
        }
    }
}

/// Where a file is first not UTF-8: why a qrels and a run were read as bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotUtf8 {
    pub path: String,
    pub line: usize,
}

/// A qrels file and a run, read as trec_eval reads them.
pub struct TrecTexts {
    pub qrels: FileText,
    pub run: FileText,
    /// `None`: both are UTF-8 text. Otherwise where the first of them (the qrels, then
    /// the run) is not, and both were read byte for byte as Latin-1 characters (see
    /// [`FileText::latin1`]): ids compare as trec_eval's `strcmp` compares them, and
    /// [`latin1_bytes`] of the output gives trec_eval's output bytes.
    pub not_utf8: Option<NotUtf8>,
}

/// Read a qrels file and a run as trec_eval reads them. trec_eval compares query and
/// document ids as C strings (`strcmp`): as UTF-8 text when both files are, else both
/// byte for byte, so that the same bytes in the two files still match and ties are
/// broken in trec_eval's order. A file that is not UTF-8 and holds a NUL byte is no
/// text: refused as before ("not valid UTF-8 text").
pub fn read_pair(qrels: Source<'_>, run: Source<'_>) -> Result<TrecTexts> {
    let names = [qrels.name(), run.name()];
    let (q, r) = rayon::join(move || qrels.into_raw(), move || run.into_raw());
    let (q, r) = rayon::join(move || q.map(utf8_or_line), move || r.map(utf8_or_line));
    let (q, r) = match (q?, r?) {
        (Ok(qrels), Ok(run)) => return Ok(TrecTexts { qrels, run, not_utf8: None }),
        other => other,
    };
    let not_utf8 = [&q, &r].into_iter().zip(names).find_map(|(read, name)| match read {
        Err((_, line)) => Some(NotUtf8 { path: name.to_string(), line: *line }),
        Ok(_) => None,
    });
    let (q, r) = rayon::join(|| as_latin1(q, names[0]), || as_latin1(r, names[1]));
    Ok(TrecTexts { qrels: q?, run: r?, not_utf8 })
}

/// A file of a pair read as bytes: its UTF-8 text (`Ok`) or its bytes with the line
/// where they are first not UTF-8, as Latin-1 characters; a NUL byte in a file that is
/// not UTF-8 makes it binary, refused.
fn as_latin1(read: std::result::Result<FileText, (Raw, usize)>, name: &str) -> Result<FileText> {
    match read {
        // ASCII text is its own Latin-1 reading: kept as it is (mapped, not copied)
        Ok(FileText { text, .. }) if text_is_ascii(&text) => Ok(FileText { text, shown: Shown::Bytes }),
        Ok(text) => Ok(FileText::latin1(text.as_str().as_bytes())),
        Err((raw, line)) if memchr::memchr(0, raw.bytes()).is_some() => Err(not_utf8_error(name, line)),
        Err((raw, _)) => Ok(FileText::latin1(raw.bytes())),
    }
}

/// A file's text as [`read_pair`] reads it when it is read alone (beside an in-memory
/// table): UTF-8, or byte for byte, with the line where it is first not UTF-8.
pub fn read_one(path: &str) -> Result<(FileText, Option<usize>)> {
    match utf8_or_line(Raw::open(path)?) {
        Ok(text) => Ok((text, None)),
        Err((raw, line)) => Ok((as_latin1(Err((raw, line)), path)?, Some(line))),
    }
}

fn text_is_ascii(text: &Text) -> bool {
    let bytes = match text {
        Text::Empty => return true,
        Text::Mapped(m) => &m[..],
        Text::Owned(s) => s.as_bytes(),
    };
    bytes.par_chunks(LATIN1_PIECE).all(|p| p.is_ascii())
}

fn not_utf8_error(path: &str, line: usize) -> Error {
    Error::parse(path, line, "not valid UTF-8 text")
}

/// A file's bytes before they are known to be UTF-8.
enum Raw {
    Mapped(Option<memmap2::Mmap>),
    Owned(Vec<u8>),
}

impl Raw {
    fn open(path: &str) -> Result<Raw> {
        let io = |e: std::io::Error| Error::Io { path: path.to_string(), message: io_message(&e) };
        let file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(Error::Io { path: path.to_string(), message: "is a directory".to_string() });
        }
        if meta.len() == 0 {
            return Ok(Raw::Mapped(None));
        }
        // SAFETY: the map is read-only and lives as long as the borrow of its text; a file
        // truncated by another process while we read it is outside what we guard against,
        // as with every tool that maps its inputs.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Ok(Raw::Mapped(Some(map)))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Raw::Mapped(Some(m)) => m,
            Raw::Mapped(None) => &[],
            Raw::Owned(v) => v,
        }
    }
}

/// The text of `raw` when it is UTF-8, else `raw` back with the 1-based line of its
/// first byte that is not.
fn utf8_or_line(raw: Raw) -> std::result::Result<FileText, (Raw, usize)> {
    match raw {
        Raw::Mapped(None) => Ok(FileText { text: Text::Empty, shown: Shown::Text }),
        Raw::Mapped(Some(map)) => match first_non_utf8_line(&map) {
            None => Ok(FileText { text: Text::Mapped(map), shown: Shown::Text }),
            Some(line) => Err((Raw::Mapped(Some(map)), line)),
        },
        Raw::Owned(bytes) => String::from_utf8(bytes).map(|s| FileText { text: Text::Owned(s), shown: Shown::Text }).map_err(|e| {
            let line = line_of_byte(e.as_bytes(), e.utf8_error().valid_up_to());
            (Raw::Owned(e.into_bytes()), line)
        }),
    }
}

/// The 1-based line of the first byte of `bytes` that is not UTF-8, or `None`.
fn first_non_utf8_line(bytes: &[u8]) -> Option<usize> {
    // Pieces cut after a newline never split a character, so they validate in parallel.
    let cuts = piece_bounds(bytes, rayon::current_num_threads() * 4);
    let invalid = |w: &[usize]| !bytes[w[0]..w[1]].is_ascii() && std::str::from_utf8(&bytes[w[0]..w[1]]).is_err();
    let w = cuts.par_windows(2).find_first(|w| invalid(w))?;
    let valid = std::str::from_utf8(&bytes[w[0]..w[1]]).err().map_or(0, |e| e.valid_up_to());
    Some(line_of_byte(bytes, w[0] + valid))
}

fn line_of_byte(bytes: &[u8], offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &bytes[..offset]).count() + 1
}

/// Cut `bytes` into about `n` pieces after newlines: `[0, c1, ..., len]`.
pub(crate) fn piece_bounds(bytes: &[u8], n: usize) -> Vec<usize> {
    let step = (bytes.len() / n.max(1)).max(1 << 16);
    let mut cuts = vec![0usize];
    let mut last = 0;
    while last < bytes.len() {
        let guess = last + step;
        last = if guess >= bytes.len() { bytes.len() } else { memchr::memchr(b'\n', &bytes[guess..]).map_or(bytes.len(), |i| guess + i + 1) };
        cuts.push(last);
    }
    cuts
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

    /// xorshift64: a reproducible stream of pseudo-random numbers for the property tests.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// A byte of `alphabet` at random.
    fn pick(state: &mut u64, alphabet: &[u8]) -> u8 {
        alphabet[(next(state) % alphabet.len() as u64) as usize]
    }

    #[test]
    fn scores_read_exactly_as_str_parse_reads_them() {
        let mut state = 0x2545_F491_4F6C_DD1D;
        let junk = b"0123456789.-+eE x";
        for case in 0..300_000 {
            let mut s = String::new();
            if case % 3 == 0 {
                // Anything from a small alphabet, mostly malformed.
                for _ in 0..1 + next(&mut state) % 22 {
                    s.push(junk[(next(&mut state) % junk.len() as u64) as usize] as char);
                }
            } else {
                match next(&mut state) % 4 {
                    0 => s.push('-'),
                    1 => s.push('+'),
                    _ => {}
                }
                for _ in 0..next(&mut state) % 13 {
                    s.push((b'0' + (next(&mut state) % 10) as u8) as char);
                }
                if !next(&mut state).is_multiple_of(4) {
                    s.push('.');
                    for _ in 0..next(&mut state) % 21 {
                        s.push((b'0' + (next(&mut state) % 10) as u8) as char);
                    }
                }
            }
            let want = s.parse::<f64>().ok().filter(|v| !v.is_nan()).map(f64::to_bits);
            assert_eq!(parse_score(&s).map(f64::to_bits), want, "{s:?}");
        }
        for s in ["101.9677734375", "-0", "0.1", "9007199254740993", "12345678.12345678", "1.", ".5", "+.5", "-", ".", "1e5", "inf", "NaN"] {
            let want = s.parse::<f64>().ok().filter(|v| !v.is_nan()).map(f64::to_bits);
            assert_eq!(parse_score(s).map(f64::to_bits), want, "{s:?}");
        }
    }

    #[test]
    fn grades_read_exactly_as_str_parse_reads_them() {
        let cases = ["0", "1", "9", "-1", "+2", "10", "007", "", "-", "x", "\u{663}", "9223372036854775808"];
        for s in cases.iter().map(|s| s.to_string()).chain((0..=255u8).map(|b| char::from(b).to_string())) {
            assert_eq!(parse_grade(&s), s.parse::<i64>().ok(), "{s:?}");
        }
    }

    #[test]
    fn whole_number_grades_written_as_decimals_are_read_fractions_are_not() {
        for (s, want) in [("1.0", Some(1)), ("2.", Some(2)), ("-1.00", Some(-1)), ("+3.0", Some(3)), ("0.000", Some(0))] {
            assert_eq!(parse_grade(s), want, "{s:?}");
        }
        for s in ["0.5", "1.01", ".0", ".", "1.0.0", "1e0", "1.0x", "-.0", "9223372036854775808.0"] {
            assert_eq!(parse_grade(s), None, "{s:?}");
        }
        let rows = parse_qrels("1 0 d1 1.0\n1 0 d2 0.0\n", "q").unwrap();
        assert_eq!((rows[0].rel, rows[1].rel), (1, 0));
        let err = parse_qrels("1 0 d1 0.5\n", "q.txt").unwrap_err();
        assert_eq!(err.to_string(), "q.txt:1: relevance \"0.5\" is not an integer");
    }

    #[test]
    fn fields_split_as_c_isspace_does() {
        let mut state = 7;
        let alphabet = b"ab1. \t\x0b\x0c\r\x00\x1f#";
        for _ in 0..50_000 {
            let len = (next(&mut state) % 150) as usize;
            let mut line: Vec<u8> = (0..len).map(|_| pick(&mut state, alphabet)).collect();
            line.push(b'\n');
            line.extend_from_slice(&[b'x'; 70]);
            let (mut fast, mut slow) = ([(0, 0); 6], [(0, 0); 6]);
            let got = split_fields(&line, 0, &mut fast);
            assert_eq!(got, split_fields_scalar(&line, 0, &mut slow), "{line:?}");
            assert_eq!(fast[..got.0.min(6)], slow[..got.0.min(6)], "{line:?}");
        }
    }

    #[test]
    fn bytes_read_as_latin1_keep_equality_and_strcmp_order_and_come_back_whole() {
        let mut state = 11;
        let alphabet = b"aZ09 \n\x7f\x80\xa0\xc3\xa9\xe9\xff";
        let random = |state: &mut u64| -> Vec<u8> {
            (0..next(state) % 12).map(|_| pick(state, alphabet)).collect()
        };
        for _ in 0..20_000 {
            let (a, b) = (random(&mut state), random(&mut state));
            let (ta, tb) = (FileText::latin1(&a), FileText::latin1(&b));
            assert_eq!(ta.as_str().cmp(tb.as_str()), a.cmp(&b), "{a:?} {b:?}");
            assert_eq!(ta.as_str().chars().count(), a.len());
            assert_eq!(latin1_bytes(ta.as_str()), a);
        }
    }

    #[test]
    fn latin1_pieces_converted_in_parallel_equal_one_character_per_byte() {
        let mut state = 5;
        let alphabet = b"ab \n\x7f\x80\xbf\xc0\xe9\xff";
        for _ in 0..300 {
            let len = (next(&mut state) % 700) as usize;
            // long ASCII runs too, so that whole 64-byte blocks are copied
            let ascii_only = next(&mut state).is_multiple_of(3);
            let bytes: Vec<u8> = (0..len).map(|_| if ascii_only { b'x' } else { pick(&mut state, alphabet) }).collect();
            let want: String = bytes.iter().map(|&b| char::from(b)).collect();
            for piece in [1, 3, 64, 65, 1 << 20] {
                assert_eq!(latin1_text(&bytes, piece), want, "piece {piece}: {bytes:?}");
            }
        }
    }

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
