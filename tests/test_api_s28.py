"""Session 28: the Python API from inside a running event loop (Jupyter, an async web app)."""
from __future__ import annotations

import asyncio

import pytest


def test_key_points_split_by_the_endpoint_work_inside_a_running_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # export_sheet with a judge splits references through split_references; in a notebook a loop is already
    # running, where asyncio.run refuses ("cannot be called from a running event loop")
    from ragmeter.review import keypoints

    async def fake_split(references, cfg):
        await asyncio.sleep(0)
        return {i: [(reference, True)] for i, (_question, reference) in references.items()}, 0

    monkeypatch.setattr(keypoints, "_split", fake_split)

    async def notebook_cell():
        return keypoints.split_references({"q1": ("Why?", "Because.")}, cfg=None)

    assert asyncio.run(notebook_cell()) == ({"q1": [("Because.", True)]}, 0)
