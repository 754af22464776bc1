"""Human review of the judge: the stratified sample and sheet (``ragmeter review export``), reading the filled
sheet back (``ragmeter review import``) and comparing raters (``ragmeter review compare``).

See :mod:`ragmeter.calibration` for the statistics and ``docs/calibration.md`` for the procedure.
"""
from __future__ import annotations

from ragmeter.review.export import export_sheet
from ragmeter.review.importer import import_sheet

__all__ = ["export_sheet", "import_sheet"]
