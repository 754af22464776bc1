# Type stubs for the Rust extension module ragmeter._core (rust/ragmeter-py).
# Each developer appends the section for the functions they register; string
# columns are (offsets int64[n + 1], data uint8[...]) tuples in Arrow layout
# (see ragmeter._columns.string_column).
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

StrColumn = Tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]

class RagmeterError(ValueError): ...
class InputError(RagmeterError): ...
class MeasureError(RagmeterError): ...

__version__: str

# --- evidence (rust/ragmeter-py/src/evidence.rs) ---------------------------

def evidence_normalize(text: str) -> str: ...
def evidence_normalize_dehyphenated(text: str) -> Optional[str]: ...
def evidence_normalize_file_name(name: str) -> str: ...
def evidence_match(
    file_offsets: npt.NDArray[np.int64],
    expected_files: StrColumn,
    phrase_offsets: npt.NDArray[np.int64],
    phrases: StrColumn,
    chunk_offsets: npt.NDArray[np.int64],
    chunk_files: StrColumn,
    chunk_texts: StrColumn,
) -> dict[str, np.ndarray]:
    """Keys: labeled (bool, per case); file_match, relevant (bool) and
    phrases_found (uint32) per chunk; phrase_first_rank, phrase_any_rank
    (uint32, 1-based, 0 = never) and phrase_empty (bool) per phrase;
    file_first_rank (uint32) per expected file."""
    ...
def evidence_phrases_in_texts(phrases: StrColumn, texts: StrColumn) -> npt.NDArray[np.bool_]: ...
