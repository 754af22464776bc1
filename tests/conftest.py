from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def conformance_dir() -> Path:
    env = os.environ.get("RAGMETER_CONFORMANCE_DIR")
    return Path(env) if env else REPO.parent / "shared" / "conformance" / "trec_eval"


def in_ci() -> bool:
    return os.environ.get("CI", "") not in ("", "0", "false")


def _missing_suite_reason() -> str:
    return (f"trec_eval conformance tests (suite not found at {conformance_dir()}; to run them, put trec_eval's "
            "test/ files there or set RAGMETER_CONFORMANCE_DIR, see README.md#layout)")


_SKIPPED_CONFORMANCE: list = []


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    # Without the suite (a fresh clone), its tests are deselected and summed up in one
    # line at the end; per-test skips would print one line per test under -ra.
    if (conformance_dir() / "qrels.test").exists() or in_ci():
        return
    needs_suite = [item for item in items if "conformance" in getattr(item, "fixturenames", ())]
    if needs_suite:
        _SKIPPED_CONFORMANCE[:] = needs_suite
        config.hook.pytest_deselected(items=needs_suite)
        deselected = set(map(id, needs_suite))
        items[:] = [item for item in items if id(item) not in deselected]


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _SKIPPED_CONFORMANCE:
        terminalreporter.write_line(f"skipped {len(_SKIPPED_CONFORMANCE)} {_missing_suite_reason()}", yellow=True)


@pytest.fixture(scope="session")
def conformance() -> Path:
    d = conformance_dir()
    if not (d / "qrels.test").exists():
        # In CI the suite must run: a missing copy is a failure, not a skip.
        if in_ci():
            pytest.fail(f"CI is set but trec_eval's test suite is not at {d} (set RAGMETER_CONFORMANCE_DIR)")
        pytest.skip(_missing_suite_reason())
    return d


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster on loopback for one test module, stopped after it (tests/test_ray*.py)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", ignore_reinit_error=True,
             log_to_driver=False)
    yield
    ray.shutdown()
