#!/usr/bin/env bash
# Install everything the tests need and run every test suite (Rust and Python).
# This is the README's test command and what CI (.ci/run) calls.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
python3 -m pip install --quiet -e '.[test]'

echo "== cargo test (ragmeter-core, no Python)"
cargo test --quiet -p ragmeter-core

echo "== stub check (python/ragmeter/_core.pyi against the compiled module)"
python3 -m mypy.stubtest ragmeter._core --allowlist stubtest-allowlist.txt

echo "== pytest"
python3 -m pytest -q "$@"
