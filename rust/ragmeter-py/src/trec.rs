//! Bindings for the trec_eval-compatible evaluator and the batch rank metrics.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use ragmeter_core::batch::{self, Batch, Metric};
use ragmeter_core::trec::{self, Evaluation, Grouped, Options};
use ragmeter_core::{Error, Result};

use crate::columns::{borrow_or_copy, extract_lines, extract_offsets, StrColumn};
use crate::to_py_err;

/// trec_eval's options that change the numbers (`-l`, `-M`, `-c`, `-J`, `-N`),
/// one object for every trec function.
#[pyclass(frozen, module = "ragmeter._core")]
#[derive(Clone, Default)]
pub struct TrecOptions(Options);

#[pymethods]
impl TrecOptions {
    #[new]
    #[pyo3(signature = (relevance_level=1, max_docs=None, complete=false, judged_only=false, num_docs_in_coll=0))]
    fn new(relevance_level: i64, max_docs: Option<i64>, complete: bool, judged_only: bool, num_docs_in_coll: i64) -> Self {
        TrecOptions(Options {
            relevance_level,
            max_docs_per_query: max_docs.map(|m| m.max(0) as usize),
            complete,
            judged_only,
            num_docs_in_coll,
        })
    }
}

fn options_or_default(options: Option<TrecOptions>) -> Options {
    options.unwrap_or_default().0
}

/// Evaluate a qrels file and a run (a file, or `run_text`: its bytes, read from stdin by the caller) as
/// trec_eval reads them: as UTF-8 text, or both byte for byte when either is not UTF-8 (then `NotUtf8` says where).
fn evaluate_pair(
    qrels_path: &str,
    run_path: &str,
    run_text: Option<Vec<u8>>,
    measures: &[String],
    opts: &Options,
) -> Result<(Evaluation, Option<trec::NotUtf8>)> {
    let run = match run_text {
        None => trec::Source::File(run_path),
        Some(bytes) => trec::Source::Bytes { name: run_path, bytes },
    };
    let texts = trec::read_pair(trec::Source::File(qrels_path), run)?;
    let eval = texts.evaluate(measures, opts, qrels_path, run_path)?;
    Ok((eval, texts.not_utf8))
}

/// Where a file is first not UTF-8, for Python: (path, line).
fn not_utf8_pair(not_utf8: Option<trec::NotUtf8>) -> Option<(String, usize)> {
    not_utf8.map(|n| (n.path, n.line))
}

/// trec_eval's text output for TREC files, and where a file is first not UTF-8, `(path, line)`, or `None`.
/// `run_text`: the run's bytes (trec_eval's results file `-`, read from stdin by the caller), `run_path` then
/// only names it in errors. When either file is not UTF-8 both are read as trec_eval reads them, byte for byte: each byte is the character of that code
/// point (Latin-1), so the text's `encode("latin-1")` is trec_eval's output, ids as their bytes.
#[pyfunction]
#[pyo3(signature = (qrels_path, run_path, measures, options=None, per_query=false, summary=true, run_text=None))]
#[allow(clippy::too_many_arguments)]
pub fn trec_eval_output(
    py: Python<'_>,
    qrels_path: String,
    run_path: String,
    measures: Vec<String>,
    options: Option<TrecOptions>,
    per_query: bool,
    summary: bool,
    run_text: Option<Vec<u8>>,
) -> PyResult<(String, Option<(String, usize)>)> {
    let opts = options_or_default(options);
    py.allow_threads(|| {
        let (eval, not_utf8) = evaluate_pair(&qrels_path, &run_path, run_text, &measures, &opts)?;
        Ok((trec::format_trec(&eval, per_query, summary), not_utf8_pair(not_utf8)))
    })
    .map_err(to_py_err)
}

fn evaluation_to_dict<'py>(py: Python<'py>, eval: Evaluation, not_utf8: Option<trec::NotUtf8>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let names: Vec<String> = eval.value_names().iter().map(|s| s.to_string()).collect();
    let width = names.len();
    let nq = eval.queries.len();
    let mut values = Vec::with_capacity(nq * width);
    for q in &eval.queries {
        values.extend_from_slice(&q.values);
    }
    let values = numpy::ndarray::Array2::from_shape_vec((nq, width), values).map_err(|e| to_py_err(Error::input(e.to_string())))?;
    let per_query_names: Vec<String> = eval
        .measures
        .iter()
        .filter(|m| !matches!(m.print, trec::Print::SummaryOnly | trec::Print::Runid | trec::Print::Relstring))
        .flat_map(|m| m.names.clone())
        .collect();
    let kinds: Vec<&str> = eval
        .measures
        .iter()
        .flat_map(|m| {
            let k = match m.print {
                trec::Print::Long => "long",
                trec::Print::SummaryOnly if m.kind == trec::Kind::NumQ => "long",
                trec::Print::SummaryOnly => "summary_only",
                trec::Print::Relstring => "relstring",
                trec::Print::Runid => "runid",
                trec::Print::Double => "double",
            };
            std::iter::repeat_n(k, m.names.len())
        })
        .collect();
    d.set_item("names", names)?;
    d.set_item("kinds", kinds)?;
    d.set_item("per_query_names", per_query_names)?;
    d.set_item("qids", eval.queries.iter().map(|q| q.qid.clone()).collect::<Vec<_>>())?;
    d.set_item("missing", eval.queries.iter().map(|q| q.missing).collect::<Vec<_>>())?;
    d.set_item("relstrings", eval.queries.iter().map(|q| q.relstring.clone()).collect::<Vec<_>>())?;
    let values: Bound<'py, PyArray2<f64>> = PyArray2::from_owned_array(py, values);
    d.set_item("values", values)?;
    d.set_item("summary", eval.summary.into_pyarray(py))?;
    d.set_item("run_id", eval.run_id)?;
    d.set_item("run_only_queries", eval.run_only_queries)?;
    d.set_item("not_utf8", not_utf8_pair(not_utf8))?;
    Ok(d)
}

/// Evaluate TREC files; per-query values as a matrix plus the summary.
#[pyfunction]
#[pyo3(signature = (qrels_path, run_path, measures, options=None))]
pub fn trec_evaluate_files<'py>(
    py: Python<'py>,
    qrels_path: String,
    run_path: String,
    measures: Vec<String>,
    options: Option<TrecOptions>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options_or_default(options);
    let (eval, not_utf8) =
        py.allow_threads(|| evaluate_pair(&qrels_path, &run_path, None, &measures, &opts)).map_err(to_py_err)?;
    evaluation_to_dict(py, eval, not_utf8)
}

/// The query id of each group and the groups' offsets: as given, or the runs of
/// equal ids of a query column with one id per row.
fn query_groups<'c>(qid: &'c StrColumn, groups: Option<Vec<usize>>, n_rows: usize, what: &str) -> Result<(Vec<&'c str>, Vec<usize>)> {
    match groups {
        None if qid.len() == n_rows => Ok(trec::consecutive_groups(qid)),
        None => Err(Error::input(format!("{what}: the query column must have one entry per row"))),
        Some(g) if g.len() == qid.len() + 1 => Ok(((0..qid.len()).map(|k| qid.get(k)).collect(), g)),
        Some(_) => Err(Error::input(format!("{what}: the query column must have one entry per group"))),
    }
}

/// A string column as numpy arrays: (offsets, UTF-8 data).
type NumpyStrColumn<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u8>>);

fn str_column<'py, 'a>(py: Python<'py>, items: impl Iterator<Item = &'a str>) -> NumpyStrColumn<'py> {
    let (mut offsets, mut data) = (vec![0i64], Vec::new());
    for s in items {
        data.extend_from_slice(s.as_bytes());
        offsets.push(data.len() as i64);
    }
    (offsets.into_pyarray(py), data.into_pyarray(py))
}

/// Where the columns of a TREC file came from, for its messages: (path, the file line of each row, the line
/// where the file is first not UTF-8 or `None`). A file that is not UTF-8 was read byte for byte, each byte
/// a Latin-1 character; its errors show ids as bytes.
type FileFacts<'py> = (String, Bound<'py, PyArray1<i64>>, Option<usize>);

/// `trec_evaluate_columns`'s `qrels_file` / `run_file`, as the Rust side reads it.
type FileFactsIn<'py> = (String, PyReadonlyArray1<'py, i64>, Option<usize>);

/// The columns of one TREC file, as `trec_evaluate_columns` takes them: query ids (one per group of
/// consecutive lines), documents, values, group offsets, and the file's facts (for `qrels_file` / `run_file`).
type FileColumns<'py, V> = (NumpyStrColumn<'py>, NumpyStrColumn<'py>, Bound<'py, PyArray1<V>>, Bound<'py, PyArray1<i64>>, FileFacts<'py>);

/// Read a qrels file into the columns `trec_evaluate_columns` takes (values: relevance).
/// Parsed in Rust, with the file's own `file:line` errors.
#[pyfunction]
pub fn trec_read_qrels<'py>(py: Python<'py>, path: String) -> PyResult<FileColumns<'py, i64>> {
    let (text, not_utf8) = py.allow_threads(|| trec::read_one(&path)).map_err(to_py_err)?;
    let rows = py.allow_threads(|| text.qrels_rows(&path)).map_err(to_py_err)?;
    let lines = rows.iter().map(|r| r.line).collect();
    let values = rows.iter().map(|r| r.rel).collect();
    Ok(file_columns(py, rows.iter().map(|r| (r.qid, r.docno)), values, (path, lines, not_utf8)))
}

/// Read a run file as [`trec_read_qrels`] reads qrels (values: the scores).
#[pyfunction]
pub fn trec_read_run<'py>(py: Python<'py>, path: String) -> PyResult<FileColumns<'py, f64>> {
    let (text, not_utf8) = py.allow_threads(|| trec::read_one(&path)).map_err(to_py_err)?;
    let rows = py.allow_threads(|| text.run_rows(&path)).map_err(to_py_err)?;
    let lines = rows.iter().map(|r| r.line).collect();
    let values = rows.iter().map(|r| r.score).collect();
    Ok(file_columns(py, rows.iter().map(|r| (r.qid, r.docno)), values, (path, lines, not_utf8)))
}

fn file_columns<'py, 'a, V: numpy::Element>(
    py: Python<'py>,
    ids: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    values: Vec<V>,
    (path, lines, not_utf8): (String, Vec<usize>, Option<usize>),
) -> FileColumns<'py, V> {
    let qids: Vec<&str> = ids.clone().map(|(q, _)| q).collect();
    let (group_qids, offsets) = trec::consecutive_groups(&qids[..]);
    let groups: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
    let (qid_column, doc_column) = (str_column(py, group_qids.into_iter()), str_column(py, ids.map(|(_, d)| d)));
    let lines: Vec<i64> = lines.into_iter().map(|l| l as i64).collect();
    let facts = (path, lines.into_pyarray(py), not_utf8);
    (qid_column, doc_column, values.into_pyarray(py), groups.into_pyarray(py), facts)
}

/// A file's facts as the engine takes them: its name, the line of each row, its first line not UTF-8.
struct FileOrigin {
    name: String,
    lines: Vec<usize>,
    not_utf8_line: Option<usize>,
}

impl FileOrigin {
    fn extract(facts: Option<FileFactsIn<'_>>, what: &str) -> PyResult<Option<FileOrigin>> {
        facts
            .map(|(name, lines, not_utf8_line)| {
                let lines = extract_lines(lines, &format!("{what}_file lines"))?;
                Ok(FileOrigin { name, lines, not_utf8_line })
            })
            .transpose()
    }
}

/// Evaluate in-memory columns (qrels: qid, docno, rel; run: qid, docno, score).
/// With `qrels_groups` / `run_groups` (offsets of consecutive rows), the query
/// column has one id per group instead of one per row. Either way each query's
/// rows are read straight from the columns (no row table). `qrels_file` / `run_file`: for the columns of a
/// file (as `trec_read_qrels` / `trec_read_run` give them), its path, the line of each row and its first line
/// not UTF-8; errors then name the file and its lines instead of `qrels` / `run` and rows, show the ids of a
/// file read byte for byte as bytes, and say why a non-ASCII query of such a file may be missing.
#[pyfunction]
#[pyo3(signature = (qrels_qid, qrels_doc, qrels_rel, run_qid, run_doc, run_score, run_id, measures, options=None, qrels_groups=None, run_groups=None, qrels_file=None, run_file=None))]
#[allow(clippy::too_many_arguments)]
pub fn trec_evaluate_columns<'py>(
    py: Python<'py>,
    qrels_qid: (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u8>),
    qrels_doc: (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u8>),
    qrels_rel: PyReadonlyArray1<'py, i64>,
    run_qid: (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u8>),
    run_doc: (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u8>),
    run_score: PyReadonlyArray1<'py, f64>,
    run_id: String,
    measures: Vec<String>,
    options: Option<TrecOptions>,
    qrels_groups: Option<PyReadonlyArray1<'py, i64>>,
    run_groups: Option<PyReadonlyArray1<'py, i64>>,
    qrels_file: Option<FileFactsIn<'py>>,
    run_file: Option<FileFactsIn<'py>>,
) -> PyResult<Bound<'py, PyDict>> {
    let qq = StrColumn::extract(qrels_qid.0, qrels_qid.1, "qrels query")?;
    let qd = StrColumn::extract(qrels_doc.0, qrels_doc.1, "qrels document")?;
    let qr = qrels_rel.as_slice()?.to_vec();
    let rq = StrColumn::extract(run_qid.0, run_qid.1, "run query")?;
    let rd = StrColumn::extract(run_doc.0, run_doc.1, "run document")?;
    let rs = run_score.as_slice()?.to_vec();
    if qd.len() != qr.len() || rd.len() != rs.len() {
        return Err(to_py_err(Error::input("qrels and run columns must each have equal lengths")));
    }
    let qrels_groups = qrels_groups.map(|g| extract_offsets(g, qr.len(), "qrels_groups")).transpose()?;
    let run_groups = run_groups.map(|g| extract_offsets(g, rs.len(), "run_groups")).transpose()?;
    let qrels_file = FileOrigin::extract(qrels_file, "qrels")?;
    let run_file = FileOrigin::extract(run_file, "run")?;
    let opts = options_or_default(options);
    let eval = py
        .allow_threads(|| {
            let (qrels_qids, qrels_offsets) = query_groups(&qq, qrels_groups, qr.len(), "qrels")?;
            let (run_qids, run_offsets) = query_groups(&rq, run_groups, rs.len(), "run")?;
            let qrels = grouped(qrels_qids, &qrels_offsets, &qd, &qr, qrels_file.as_ref(), "qrels");
            let run = grouped(run_qids, &run_offsets, &rd, &rs, run_file.as_ref(), "run");
            trec::evaluate_grouped(&qrels, &run, &measures, &opts, &run_id)
        })
        .map_err(to_py_err)?;
    evaluation_to_dict(py, eval, None)
}

/// Grouped columns named `what` (`qrels`, `run`), or after the file they were read from.
fn grouped<'a, V>(
    qids: Vec<&'a str>,
    offsets: &'a [usize],
    docs: &'a StrColumn,
    values: &'a [V],
    file: Option<&'a FileOrigin>,
    what: &'a str,
) -> Grouped<'a, StrColumn, V> {
    Grouped {
        qids,
        offsets,
        docs,
        values,
        name: file.map_or(what, |f| f.name.as_str()),
        lines: file.map(|f| &f.lines[..]),
        not_utf8_line: file.and_then(|f| f.not_utf8_line),
    }
}

/// Rank metrics over a batch: returns an (n_queries, n_metrics) matrix.
#[pyfunction]
#[pyo3(signature = (offsets, grades, num_relevant, metrics, relevance_level=1.0, ideal_offsets=None, ideal_grades=None))]
#[allow(clippy::too_many_arguments)]
pub fn rank_metrics<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    grades: PyReadonlyArray1<'py, f64>,
    num_relevant: PyReadonlyArray1<'py, f64>,
    metrics: Vec<String>,
    relevance_level: f64,
    ideal_offsets: Option<PyReadonlyArray1<'py, i64>>,
    ideal_grades: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let metrics: Vec<Metric> = metrics.iter().map(|m| Metric::parse(m)).collect::<Result<_>>().map_err(to_py_err)?;
    // A chunk table's grades are tens of MB: borrowed when read-only (ragmeter's own calls), not copied.
    let grades_v = borrow_or_copy(&grades)?;
    let offsets_v = extract_offsets(offsets, grades_v.len(), "offsets")?;
    let num_rel = num_relevant.as_slice()?.to_vec();
    let (io, ig) = match (ideal_offsets, ideal_grades) {
        (Some(o), Some(g)) => {
            let g = g.as_slice()?.to_vec();
            (Some(extract_offsets(o, g.len(), "ideal_offsets")?), Some(g))
        }
        (None, None) => (None, None),
        _ => return Err(to_py_err(Error::input("ideal_offsets and ideal_grades go together"))),
    };
    let width = metrics.len();
    let out = py
        .allow_threads(|| {
            let b = Batch {
                offsets: &offsets_v,
                grades: &grades_v,
                num_relevant: &num_rel,
                ideal_offsets: io.as_deref(),
                ideal_grades: ig.as_deref(),
            };
            batch::compute(&b, &metrics, relevance_level)
        })
        .map_err(to_py_err)?;
    // One row per query, also when no metric is asked for (out is then empty: its length says nothing).
    let n = offsets_v.len() - 1;
    let arr = numpy::ndarray::Array2::from_shape_vec((n, width), out).map_err(|e| to_py_err(Error::input(e.to_string())))?;
    Ok(PyArray2::from_owned_array(py, arr))
}


/// Threshold sweep: dict of (n_thresholds, n_queries) matrices `hit`, `reciprocal_rank`, `kept`.
#[pyfunction]
#[pyo3(signature = (offsets, grades, scores, thresholds, k, relevance_level=1.0))]
pub fn threshold_sweep<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    grades: PyReadonlyArray1<'py, f64>,
    scores: PyReadonlyArray1<'py, f64>,
    thresholds: Vec<f64>,
    k: usize,
    relevance_level: f64,
) -> PyResult<Bound<'py, PyDict>> {
    // A chunk table's grades are tens of MB: borrowed when read-only (ragmeter's own calls), not copied.
    let grades_v = borrow_or_copy(&grades)?;
    let scores_v = scores.as_slice()?.to_vec();
    let offsets_v = extract_offsets(offsets, grades_v.len(), "offsets")?;
    let sweep = py
        .allow_threads(|| batch::threshold_sweep(&offsets_v, &grades_v, &scores_v, &thresholds, k, relevance_level))
        .map_err(to_py_err)?;
    let n = offsets_v.len() - 1;
    let d = PyDict::new(py);
    for (name, values) in [("hit", sweep.hit), ("reciprocal_rank", sweep.reciprocal_rank), ("kept", sweep.kept)] {
        let arr = numpy::ndarray::Array2::from_shape_vec((thresholds.len(), n), values)
            .map_err(|e| to_py_err(Error::input(e.to_string())))?;
        d.set_item(name, PyArray2::from_owned_array(py, arr))?;
    }
    Ok(d)
}

/// Names accepted by `-m`.
#[pyfunction]
pub fn trec_known_measures() -> Vec<&'static str> {
    trec::known_measures()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TrecOptions>()?;
    m.add_function(wrap_pyfunction!(trec_eval_output, m)?)?;
    m.add_function(wrap_pyfunction!(trec_evaluate_files, m)?)?;
    m.add_function(wrap_pyfunction!(trec_evaluate_columns, m)?)?;
    m.add_function(wrap_pyfunction!(trec_read_qrels, m)?)?;
    m.add_function(wrap_pyfunction!(trec_read_run, m)?)?;
    m.add_function(wrap_pyfunction!(rank_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(threshold_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(trec_known_measures, m)?)?;
    Ok(())
}
