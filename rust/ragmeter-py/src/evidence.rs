//! Binding for `ragmeter_core::evidence`: normalisation and batch relevance.
//!
//! String columns arrive in Arrow layout as `(offsets int64, data uint8)`
//! tuples (see `python/ragmeter/_columns.py::string_column`). The small
//! columns (expected files, phrases, chunk file names) are copied with
//! [`StrColumn`]. The chunk-text column is the bulk of a run (gigabytes for
//! 100,000 cases x 20 chunks), so when its data array is read-only — as the
//! read-only views over immutable Arrow buffers that `ragmeter.evidence`
//! passes are — it is borrowed instead of copied, and validated (UTF-8 of each value)
//! in parallel with the GIL released. A writeable data array is copied, so
//! nothing Python can mutate is read without the GIL.

use std::borrow::Cow;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

use ragmeter_core::evidence::{self, DictStrings, EvidenceBatch, Strings};
use ragmeter_core::Error;

use crate::columns::{borrow_or_copy, extract_offsets, StrColumn};
use crate::to_py_err;

type StrArrays<'py> = (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u8>);

struct Small(StrColumn);

impl Strings for Small {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> &str {
        self.0.get(i)
    }
}

fn small(col: StrArrays<'_>, name: &str) -> PyResult<Small> {
    Ok(Small(StrColumn::extract(col.0, col.1, name)?))
}

/// A string column whose data is borrowed when read-only, copied otherwise.
struct Texts<'a> {
    offsets: Vec<i64>,
    data: Cow<'a, [u8]>,
    validated: bool,
}

impl Texts<'_> {
    /// Check offsets and UTF-8 of every value (call with the GIL released).
    fn validate(&mut self, name: &str) -> Result<(), Error> {
        let bad = |msg: &str| Error::input(format!("column {name}: {msg}"));
        let o = &self.offsets;
        if o.is_empty() {
            return Err(bad("offsets must have n + 1 entries"));
        }
        if o[0] < 0 || o.windows(2).any(|w| w[0] > w[1]) || *o.last().unwrap() as usize > self.data.len() {
            return Err(bad("offsets are not monotone or point past the data"));
        }
        let ok = (0..o.len() - 1)
            .into_par_iter()
            .with_min_len(256)
            .all(|i| simdutf8::basic::from_utf8(&self.data[o[i] as usize..o[i + 1] as usize]).is_ok());
        if !ok {
            return Err(bad("data is not valid UTF-8 (or an offset splits a character)"));
        }
        self.validated = true;
        Ok(())
    }
}

impl Strings for Texts<'_> {
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    fn get(&self, i: usize) -> &str {
        let bytes = &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize];
        if !self.validated {
            return "";
        }
        // SAFETY: `validate` succeeded (checked just above), so every value is
        // UTF-8, and the data is either owned or a read-only
        // array that nothing writes to during the call.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

fn texts<'a>(col: &'a StrArrays<'_>) -> PyResult<Texts<'a>> {
    Ok(Texts { offsets: col.0.as_slice()?.to_vec(), data: borrow_or_copy(&col.1)?, validated: false })
}

/// A string column in Arrow's string-view layout (what Polars holds in
/// memory): 16-byte views, each either inline (length <= 12) or pointing into
/// one of the data buffers. Borrowed when every array is read-only (read-only
/// views over immutable Arrow buffers), copied otherwise, so no copy of the
/// texts is made to cross into Rust.
struct ViewTexts<'a> {
    views: Cow<'a, [u8]>,
    buffers: Vec<Cow<'a, [u8]>>,
    validated: bool,
}

impl ViewTexts<'_> {
    #[inline]
    fn bytes(&self, i: usize) -> Option<&[u8]> {
        let v = &self.views[i * 16..i * 16 + 16];
        let len = u32::from_le_bytes(v[0..4].try_into().ok()?) as usize;
        if len <= 12 {
            return Some(&v[4..4 + len]);
        }
        let buf = u32::from_le_bytes(v[8..12].try_into().ok()?) as usize;
        let off = u32::from_le_bytes(v[12..16].try_into().ok()?) as usize;
        self.buffers.get(buf)?.get(off..off.checked_add(len)?)
    }

    /// Check every view's bounds and UTF-8 (call with the GIL released).
    ///
    /// Each view's own bytes are validated, not the data buffers as a whole:
    /// a buffer may hold bytes no view points at (Polars' Parquet reader
    /// keeps the pages' 4-byte length prefixes between the values, which are
    /// not UTF-8 when a value is 128 bytes or longer).
    fn validate(&mut self, name: &str) -> Result<(), Error> {
        let bad = |msg: String| Error::input(format!("column {name}: {msg}"));
        if !self.views.len().is_multiple_of(16) {
            return Err(bad("string views must be 16 bytes each".into()));
        }
        let first_bad = (0..self.views.len() / 16)
            .into_par_iter()
            .with_min_len(256)
            .find_first(|&i| self.bytes(i).is_none_or(|b| simdutf8::basic::from_utf8(b).is_err()));
        if let Some(i) = first_bad {
            let what = if self.bytes(i).is_some() { "is not valid UTF-8" } else { "points outside its buffer" };
            return Err(bad(format!("value {i} {what}")));
        }
        self.validated = true;
        Ok(())
    }
}

impl Strings for ViewTexts<'_> {
    fn len(&self) -> usize {
        self.views.len() / 16
    }
    fn get(&self, i: usize) -> &str {
        if !self.validated {
            return "";
        }
        let bytes = self.bytes(i).unwrap_or(&[]);
        // SAFETY: `validate` succeeded, so every view is in bounds and UTF-8,
        // and the arrays are owned or read-only for the duration of the call.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

/// The values of a dictionary-encoded text column and, one past them, the
/// empty text that stands for a null one.
struct WithEmpty<'a>(Texts<'a>);

impl Strings for WithEmpty<'_> {
    fn len(&self) -> usize {
        self.0.len() + 1
    }
    fn get(&self, i: usize) -> &str {
        if i == self.0.len() {
            ""
        } else {
            self.0.get(i)
        }
    }
}

/// A dictionary-encoded text column (what pyarrow's Parquet reader gives for a
/// column written with dictionary pages): only its values are validated, and
/// copies are grouped by index.
type DictTexts<'a> = DictStrings<WithEmpty<'a>>;

/// `values` and, per text, its value's index in `ids` (negative: a null text).
fn dict_texts<'a>(values: Texts<'a>, ids: &PyReadonlyArray1<'_, i32>) -> PyResult<DictTexts<'a>> {
    let n = values.len();
    let empty = u32::try_from(n).map_err(|_| PyValueError::new_err("text_ids: too many dictionary values"))?;
    let ids = ids.as_slice()?;
    if let Some(i) = ids.iter().position(|&id| id as i64 >= n as i64) {
        return Err(PyValueError::new_err(format!("text_ids: index {} of text {i} is past the {n} values", ids[i])));
    }
    let ids = ids.iter().map(|&id| if id < 0 { empty } else { id as u32 }).collect();
    DictStrings::new(WithEmpty(values), ids).map_err(to_py_err)
}

/// evidence_match_views(file_offsets, expected_files, phrase_offsets, phrases,
/// chunk_offsets, chunk_files, text_views, text_buffers, run_wide=False) ->
/// dict[str, ndarray]
///
/// [`evidence_match`] with the chunk texts in Arrow string-view layout
/// (`text_views`: uint8, 16 bytes per text, no nulls; `text_buffers`: the
/// uint8 data buffers), as Polars stores them: no copy of the texts.
#[pyfunction]
#[pyo3(signature = (file_offsets, expected_files, phrase_offsets, phrases, chunk_offsets, chunk_files, text_views, text_buffers, run_wide = false, run_index = None, run_phrases = None))]
#[allow(clippy::too_many_arguments)]
fn evidence_match_views<'py>(
    py: Python<'py>,
    file_offsets: PyReadonlyArray1<'py, i64>,
    expected_files: StrArrays<'py>,
    phrase_offsets: PyReadonlyArray1<'py, i64>,
    phrases: StrArrays<'py>,
    chunk_offsets: PyReadonlyArray1<'py, i64>,
    chunk_files: StrArrays<'py>,
    text_views: PyReadonlyArray1<'py, u8>,
    text_buffers: Vec<PyReadonlyArray1<'py, u8>>,
    run_wide: bool,
    run_index: Option<Bound<'py, RunPhraseIndex>>,
    run_phrases: Option<PyReadonlyArray1<'py, i64>>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut texts = ViewTexts {
        views: borrow_or_copy(&text_views)?,
        buffers: text_buffers.iter().map(borrow_or_copy).collect::<PyResult<_>>()?,
        validated: false,
    };
    match_chunk_texts(
        py,
        (file_offsets, expected_files),
        (phrase_offsets, phrases),
        (chunk_offsets, chunk_files),
        &mut texts,
        run_mode(run_wide, run_index, run_phrases)?,
    )
}

/// How a match takes part in the run-wide check.
enum RunMode<'py> {
    None,
    /// `phrase_in_run` over this batch alone.
    Batch,
    /// Record in a [`RunPhraseIndex`] what the batch's texts contain; its
    /// phrase `i` is the index's phrase `ids[i]`.
    Index(Bound<'py, RunPhraseIndex>, Vec<usize>),
}

fn run_mode<'py>(run_wide: bool, index: Option<Bound<'py, RunPhraseIndex>>, ids: Option<PyReadonlyArray1<'py, i64>>) -> PyResult<RunMode<'py>> {
    match (index, ids) {
        (None, None) => Ok(if run_wide { RunMode::Batch } else { RunMode::None }),
        (Some(_), Some(_)) if run_wide => Err(PyValueError::new_err("run_wide and run_index exclude each other")),
        (Some(index), Some(ids)) => {
            let ids = ids.as_slice()?;
            if ids.iter().any(|&i| i < 0) {
                return Err(PyValueError::new_err("run_phrases: indices must not be negative"));
            }
            Ok(RunMode::Index(index, ids.iter().map(|&i| i as usize).collect()))
        }
        _ => Err(PyValueError::new_err("run_index and run_phrases go together")),
    }
}

/// Texts that are checked (UTF-8, bounds) once, with the GIL released.
trait ChunkTexts: Strings + Send {
    fn check(&mut self, name: &str) -> Result<(), Error>;
}

impl ChunkTexts for Texts<'_> {
    fn check(&mut self, name: &str) -> Result<(), Error> {
        self.validate(name)
    }
}

impl ChunkTexts for ViewTexts<'_> {
    fn check(&mut self, name: &str) -> Result<(), Error> {
        self.validate(name)
    }
}

impl ChunkTexts for DictTexts<'_> {
    fn check(&mut self, name: &str) -> Result<(), Error> {
        self.values_mut().0.validate(name)
    }
}

type OffsetsAndStrings<'py> = (PyReadonlyArray1<'py, i64>, StrArrays<'py>);

/// The shared part of both `evidence_match` bindings: take the columns, match with the GIL released.
fn match_chunk_texts<'py, T: ChunkTexts>(
    py: Python<'py>,
    files: OffsetsAndStrings<'py>,
    phrases: OffsetsAndStrings<'py>,
    chunks: OffsetsAndStrings<'py>,
    texts: &mut T,
    run: RunMode<'py>,
) -> PyResult<Bound<'py, PyDict>> {
    let expected_files = small(files.1, "expected_files")?;
    let phrase_strings = small(phrases.1, "phrases")?;
    let chunk_files = small(chunks.1, "chunk_files")?;
    let file_offsets = extract_offsets(files.0, expected_files.len(), "file_offsets")?;
    let phrase_offsets = extract_offsets(phrases.0, phrase_strings.len(), "phrase_offsets")?;
    let chunk_offsets = extract_offsets(chunks.0, chunk_files.len(), "chunk_offsets")?;
    let run_wide = matches!(run, RunMode::Batch);
    let (mut index, ids) = match run {
        RunMode::Index(index, ids) => (Some(index.try_borrow_mut()?), ids),
        _ => (None, Vec::new()),
    };
    let index = index.as_deref_mut().map(|i| &mut i.inner);
    let result = py
        .allow_threads(|| {
            texts.check("chunk_texts")?;
            let batch: EvidenceBatch<'_, dyn Strings> = EvidenceBatch {
                file_offsets: &file_offsets,
                expected_files: &expected_files,
                phrase_offsets: &phrase_offsets,
                phrases: &phrase_strings,
                chunk_offsets: &chunk_offsets,
                chunk_files: &chunk_files,
                chunk_texts: &*texts,
            };
            match index {
                Some(index) => index.match_batch(&batch, &ids),
                None => evidence::match_evidence_with(&batch, run_wide),
            }
        })
        .map_err(to_py_err)?;
    result_dict(py, result, run_wide)
}

/// RunPhraseIndex(phrases): the run-wide check of a run matched a slice at a
/// time. Built from every evidence phrase of the golden set (`(offsets,
/// data)`, flattened in golden order); each `evidence_match*` call given it
/// (with `run_phrases`, the index of each of the call's phrases here) probes
/// it with the call's chunk texts while matching them, keeping none of them.
/// `phrase_in_run()` then says, per phrase, whether some chunk of those calls
/// contains it.
#[pyclass(module = "ragmeter._core")]
pub struct RunPhraseIndex {
    inner: evidence::RunPhrases,
}

#[pymethods]
impl RunPhraseIndex {
    #[new]
    fn new(py: Python<'_>, phrases: StrArrays<'_>) -> PyResult<Self> {
        let phrases = small(phrases, "phrases")?;
        Ok(RunPhraseIndex { inner: py.allow_threads(|| evidence::RunPhrases::new(&phrases)) })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Per phrase: found in some chunk text matched with this index so far.
    fn phrase_in_run<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        PyArray1::from_vec(py, self.inner.found())
    }
}

fn result_dict(py: Python<'_>, result: evidence::EvidenceResult, run_wide: bool) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("labeled", PyArray1::from_vec(py, result.labeled))?;
    out.set_item("file_match", PyArray1::from_vec(py, result.file_match))?;
    out.set_item("relevant", PyArray1::from_vec(py, result.relevant))?;
    out.set_item("phrases_found", PyArray1::from_vec(py, result.phrases_found))?;
    out.set_item("phrase_first_rank", PyArray1::from_vec(py, result.phrase_first_rank))?;
    out.set_item("phrase_any_rank", PyArray1::from_vec(py, result.phrase_any_rank))?;
    out.set_item("phrase_empty", PyArray1::from_vec(py, result.phrase_empty))?;
    out.set_item("file_first_rank", PyArray1::from_vec(py, result.file_first_rank))?;
    if run_wide {
        out.set_item("phrase_in_run", PyArray1::from_vec(py, result.phrase_in_run))?;
    }
    Ok(out)
}

/// evidence_normalize(text) -> str: NFKC, drop white space and invisible
/// format characters, lower-case.
#[pyfunction]
fn evidence_normalize(py: Python<'_>, text: &str) -> String {
    if text.len() > 1 << 16 {
        py.allow_threads(|| evidence::normalize(text))
    } else {
        evidence::normalize(text)
    }
}

/// evidence_normalize_dehyphenated(text) -> str | None: the second matching
/// variant (line-break hyphens dropped), None when the text has none.
#[pyfunction]
fn evidence_normalize_dehyphenated(text: &str) -> Option<String> {
    evidence::normalize_dehyphenated(text)
}

/// evidence_normalize_file_name(name) -> str
#[pyfunction]
fn evidence_normalize_file_name(name: &str) -> String {
    evidence::normalize_file_name(name)
}

/// evidence_match(file_offsets, expected_files, phrase_offsets, phrases,
/// chunk_offsets, chunk_files, chunk_texts) -> dict[str, ndarray]
///
/// Offsets are int64 with n_cases + 1 entries; string columns are
/// `(offsets, data)` tuples. Returns per case `labeled` (bool); per chunk
/// `file_match`, `relevant` (bool) and `phrases_found` (uint32); per phrase
/// `phrase_first_rank`, `phrase_any_rank` (uint32, 1-based, 0 = never) and
/// `phrase_empty` (bool); per expected file `file_first_rank` (uint32). With
/// `run_wide=True` also `phrase_in_run` (bool, per phrase): the phrase occurs
/// in some chunk of any case (searched for after the match, only for the
/// phrases not found in their own case, in the texts whose raw bytes could
/// hold one).
/// With `run_index` (a [`RunPhraseIndex`]) and `run_phrases` (int64, per
/// phrase its index there) the texts are checked against that index instead.
#[pyfunction]
#[pyo3(signature = (file_offsets, expected_files, phrase_offsets, phrases, chunk_offsets, chunk_files, chunk_texts, run_wide = false, run_index = None, run_phrases = None, text_ids = None))]
#[allow(clippy::too_many_arguments)]
fn evidence_match<'py>(
    py: Python<'py>,
    file_offsets: PyReadonlyArray1<'py, i64>,
    expected_files: StrArrays<'py>,
    phrase_offsets: PyReadonlyArray1<'py, i64>,
    phrases: StrArrays<'py>,
    chunk_offsets: PyReadonlyArray1<'py, i64>,
    chunk_files: StrArrays<'py>,
    chunk_texts: StrArrays<'py>,
    run_wide: bool,
    run_index: Option<Bound<'py, RunPhraseIndex>>,
    run_phrases: Option<PyReadonlyArray1<'py, i64>>,
    text_ids: Option<PyReadonlyArray1<'py, i32>>,
) -> PyResult<Bound<'py, PyDict>> {
    let files = (file_offsets, expected_files);
    let phrases = (phrase_offsets, phrases);
    let chunks = (chunk_offsets, chunk_files);
    let run = run_mode(run_wide, run_index, run_phrases)?;
    match text_ids {
        Some(ids) => match_chunk_texts(py, files, phrases, chunks, &mut dict_texts(texts(&chunk_texts)?, &ids)?, run),
        None => match_chunk_texts(py, files, phrases, chunks, &mut texts(&chunk_texts)?, run),
    }
}

/// A string column in Arrow's large_string layout, handed to Python.
type ArrowStrings<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u8>>);

/// strings_gather(offsets, data, ids) -> (offsets, data): the strings
/// `values[ids[i]]` (empty where `ids[i]` is negative) of the string column
/// `values` (`(offsets int64, data uint8)`), as one column in Arrow's
/// large_string layout: what a dictionary-encoded column holds, written out.
#[pyfunction]
fn strings_gather<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    data: PyReadonlyArray1<'py, u8>,
    ids: PyReadonlyArray1<'py, i32>,
) -> PyResult<ArrowStrings<'py>> {
    let col = (offsets, data);
    let mut dict = dict_texts(texts(&col)?, &ids)?;
    let (offsets, data) = py
        .allow_threads(|| {
            dict.values_mut().0.validate("values")?;
            let mut offsets = Vec::with_capacity(dict.len() + 1);
            offsets.push(0i64);
            let mut total = 0usize;
            for i in 0..dict.len() {
                total += dict.get(i).len();
                offsets.push(total as i64);
            }
            let mut data = Vec::with_capacity(total);
            for i in 0..dict.len() {
                data.extend_from_slice(dict.get(i).as_bytes());
            }
            Ok::<_, Error>((offsets, data))
        })
        .map_err(to_py_err)?;
    Ok((PyArray1::from_vec(py, offsets), PyArray1::from_vec(py, data)))
}

/// evidence_phrases_in_texts(phrases, texts) -> ndarray[bool]: per phrase,
/// does it occur (normalised) in at least one text?
#[pyfunction]
fn evidence_phrases_in_texts<'py>(py: Python<'py>, phrases: StrArrays<'py>, texts: StrArrays<'py>) -> PyResult<Bound<'py, PyArray1<bool>>> {
    let phrases = small(phrases, "phrases")?;
    let mut texts = self::texts(&texts)?;
    let found = py
        .allow_threads(|| {
            texts.validate("texts")?;
            evidence::phrases_in_texts(&phrases, &texts)
        })
        .map_err(to_py_err)?;
    Ok(PyArray1::from_vec(py, found))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(evidence_normalize, m)?)?;
    m.add_function(wrap_pyfunction!(evidence_normalize_dehyphenated, m)?)?;
    m.add_function(wrap_pyfunction!(evidence_normalize_file_name, m)?)?;
    m.add_function(wrap_pyfunction!(evidence_match, m)?)?;
    m.add_function(wrap_pyfunction!(evidence_match_views, m)?)?;
    m.add_function(wrap_pyfunction!(evidence_phrases_in_texts, m)?)?;
    m.add_function(wrap_pyfunction!(strings_gather, m)?)?;
    m.add_class::<RunPhraseIndex>()?;
    Ok(())
}
