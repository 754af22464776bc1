#!/usr/bin/env bash
# Install everything the tests need and run every test suite (Rust and Python).
# This is the README's test command and what CI (.ci/run) calls.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet -e '.[test]'

# The HTML report is tested in headless Chromium (Debian's package).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "== installing chromium for the report tests"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the report screenshot test will fail in CI" >&2
fi

echo "== cargo test (ragmeter-core, no Python)"
cargo test --quiet -p ragmeter-core

echo "== stub check (python/ragmeter/_core.pyi against the compiled module)"
python3 -m mypy.stubtest ragmeter._core --allowlist stubtest-allowlist.txt

echo "== pytest"
python3 -m pytest -q "$@"
