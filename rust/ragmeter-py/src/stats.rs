//! Binding for `ragmeter_core::stats`: the seeded bootstrap kernel.
//!
//! Inputs are copied into owned buffers while the GIL is held (so nothing
//! Python can mutate is read without it), then the resampling runs with the
//! GIL released.

use numpy::{PyArray2, PyArray3, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use ragmeter_core::stats;
use ragmeter_core::Error;

use crate::to_py_err;

fn shape_err(e: impl std::fmt::Display) -> PyErr {
    to_py_err(Error::input(e.to_string()))
}

/// Resampled means of every column of `values` (n x k float64, NaN = unscored),
/// overall and per group: `(n_resamples, 1 + n_groups, k)`, slot 0 overall.
#[pyfunction]
#[pyo3(signature = (values, codes, n_groups, n_resamples, seed, threads=None))]
pub fn bootstrap_means<'py>(
    py: Python<'py>,
    values: PyReadonlyArray2<'py, f64>,
    codes: PyReadonlyArray1<'py, i64>,
    n_groups: usize,
    n_resamples: usize,
    seed: u64,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray3<f64>>> {
    let view = values.as_array();
    let (n, k) = view.dim();
    let vals: Vec<f64> = view.iter().copied().collect(); // row-major whatever the input's strides
    let mut code_v = Vec::with_capacity(codes.len()?);
    for &c in codes.as_array().iter() {
        if c < 0 || c > u32::MAX as i64 {
            return Err(to_py_err(Error::input(format!("bootstrap: group code {c} out of range"))));
        }
        code_v.push(c as u32);
    }
    let out = py
        .allow_threads(|| stats::bootstrap_means(&vals, n, k, &code_v, n_groups, n_resamples, seed, threads))
        .map_err(to_py_err)?;
    let arr = numpy::ndarray::Array3::from_shape_vec((n_resamples, 1 + n_groups, k), out).map_err(shape_err)?;
    Ok(PyArray3::from_owned_array(py, arr))
}

/// The per-case counts of each resample, `(n_resamples, n)` int32: the very
/// counts `bootstrap_means` uses for the same seed (cases in stable group order).
#[pyfunction]
pub fn bootstrap_counts<'py>(py: Python<'py>, n: usize, n_resamples: usize, seed: u64) -> PyResult<Bound<'py, PyArray2<i32>>> {
    let out = py.allow_threads(|| stats::resample_counts(n, n_resamples, seed)).map_err(to_py_err)?;
    let arr = numpy::ndarray::Array2::from_shape_vec((n_resamples, n), out).map_err(shape_err)?;
    Ok(PyArray2::from_owned_array(py, arr))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bootstrap_means, m)?)?;
    m.add_function(wrap_pyfunction!(bootstrap_counts, m)?)?;
    m.add("BOOTSTRAP_BLOCK", stats::BLOCK)?;
    Ok(())
}
