"""The ragmeter pytest plugin (entry point ``pytest11``): ``--ragmeter-baseline DIR`` and the
``ragmeter_baseline`` fixture, the results folder of the run to compare against (an
:class:`ragmeter.api.EvalResult`). Without the option, tests using the fixture are skipped and say why.

ragmeter itself is imported only when the fixture is used: installing ragmeter does not slow other projects'
test runs.
"""
from __future__ import annotations

from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("ragmeter", "ragmeter: RAG evaluation baselines")
    group.addoption("--ragmeter-baseline", metavar="DIR", default=None,
                    help="results folder (ragmeter eval --out DIR) that the ragmeter_baseline fixture loads")


@pytest.fixture(scope="session")
def ragmeter_baseline(request: Any) -> Any:
    """The baseline results folder given by ``--ragmeter-baseline DIR``, loaded as an ``EvalResult``."""
    path = request.config.getoption("ragmeter_baseline")
    if not path:
        pytest.skip("no ragmeter baseline: pass --ragmeter-baseline DIR (a folder written by ragmeter eval --out)")
    from ragmeter.api import EvalResult
    from ragmeter.errors import InputError

    try:
        return EvalResult.load(path)
    except InputError as exc:
        problem = str(exc)
    # a usage error: one line, no traceback into ragmeter (a UsageError raised here was reported with the
    # fixture's source) and outside the except block (no "During handling of the above exception")
    pytest.fail(f"--ragmeter-baseline: {problem}", pytrace=False)
