//! Thin PyO3 binding over `ragmeter-core`. Inputs are copied into owned Rust
//! buffers while the GIL is held, the work runs with the GIL released, and core
//! errors become typed Python exceptions.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use ragmeter_core::Error;

mod columns;
mod evidence;
mod stats;
mod trec;

create_exception!(ragmeter._core, RagmeterError, PyValueError, "Base class of every ragmeter user error.");
create_exception!(ragmeter._core, InputError, RagmeterError, "An input file or table is missing or malformed.");
create_exception!(ragmeter._core, MeasureError, RagmeterError, "A measure name or its parameters are not understood.");

pub(crate) fn to_py_err(err: Error) -> PyErr {
    match err {
        Error::Measure { .. } => MeasureError::new_err(err.to_string()),
        _ => InputError::new_err(err.to_string()),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RagmeterError", py.get_type::<RagmeterError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("MeasureError", py.get_type::<MeasureError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    evidence::register(m)?;
    stats::register(m)?;
    trec::register(m)?;
    Ok(())
}
