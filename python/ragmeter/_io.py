"""Writing outputs all-or-nothing: files go to a temporary folder first and are
moved into place only when every one of them was written."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


@contextlib.contextmanager
def atomic_outputs(out_dir: Any) -> Iterator[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ragmeter-", dir=out))
    try:
        yield tmp
        for item in tmp.iterdir():
            os.replace(item, out / item.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
