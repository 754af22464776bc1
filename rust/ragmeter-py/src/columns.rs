//! Owned copies of column inputs, taken while the GIL is held.

use std::borrow::Cow;

use numpy::{Element, PyReadonlyArray1};
use pyo3::prelude::*;

use ragmeter_core::Error;

/// A string column in Arrow layout: value `i` is `data[offsets[i]..offsets[i+1]]`.
pub struct StrColumn {
    offsets: Vec<i64>,
    data: Vec<u8>,
}

impl StrColumn {
    /// Copy and validate the buffers (offsets monotone, in bounds, UTF-8 data).
    pub fn extract(offsets: PyReadonlyArray1<'_, i64>, data: PyReadonlyArray1<'_, u8>, name: &str) -> PyResult<Self> {
        let offsets = offsets.as_slice()?.to_vec();
        let data = data.as_slice()?.to_vec();
        let bad = |msg: &str| crate::to_py_err(Error::input(format!("column {name}: {msg}")));
        if offsets.is_empty() {
            return Err(bad("offsets must have n + 1 entries"));
        }
        if offsets.windows(2).any(|w| w[0] > w[1]) || offsets[0] < 0 || *offsets.last().unwrap() as usize > data.len() {
            return Err(bad("offsets are not monotone or point past the data"));
        }
        if simdutf8::basic::from_utf8(&data).is_err() {
            return Err(bad("data is not valid UTF-8"));
        }
        // A UTF-8 continuation byte (0b10xx_xxxx) never starts a character.
        if offsets.iter().any(|&o| data.get(o as usize).is_some_and(|&b| b & 0xC0 == 0x80)) {
            return Err(bad("an offset falls inside a character"));
        }
        Ok(StrColumn { offsets, data })
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn get(&self, i: usize) -> &str {
        let bytes = &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize];
        // SAFETY: `extract` checked that the data is UTF-8 and every offset a char boundary.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

impl ragmeter_core::evidence::Strings for StrColumn {
    fn len(&self) -> usize {
        StrColumn::len(self)
    }
    fn get(&self, i: usize) -> &str {
        StrColumn::get(self, i)
    }
}

/// Copy a group-offsets array (n + 1 entries, monotone, last == total).
pub fn extract_offsets(offsets: PyReadonlyArray1<'_, i64>, total: usize, name: &str) -> PyResult<Vec<usize>> {
    let raw = offsets.as_slice()?;
    let bad = |msg: &str| crate::to_py_err(Error::input(format!("{name}: {msg}")));
    if raw.is_empty() || raw[0] != 0 || raw.windows(2).any(|w| w[0] > w[1]) || *raw.last().unwrap() as usize != total {
        return Err(bad("offsets must start at 0, never decrease and end at the number of values"));
    }
    Ok(raw.iter().map(|&o| o as usize).collect())
}

/// File line numbers (1-based), one per row of columns read from a file.
pub fn extract_lines(lines: PyReadonlyArray1<'_, i64>, name: &str) -> PyResult<Vec<usize>> {
    let raw = lines.as_slice()?;
    raw.iter()
        .map(|&line| usize::try_from(line).ok().filter(|&l| l > 0))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| crate::to_py_err(Error::input(format!("{name}: line numbers must be positive"))))
}

/// A numpy array's values, borrowed when the array is read-only (nothing in Python can write to it while the
/// GIL is released), copied otherwise.
pub fn borrow_or_copy<'a, T: Element + Copy>(a: &'a PyReadonlyArray1<'_, T>) -> PyResult<Cow<'a, [T]>> {
    let writeable: bool = a.getattr("flags")?.getattr("writeable")?.extract()?;
    Ok(if writeable { Cow::Owned(a.as_slice()?.to_vec()) } else { Cow::Borrowed(a.as_slice()?) })
}
