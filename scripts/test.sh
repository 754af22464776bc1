#!/usr/bin/env bash
# Install everything the tests need and run every test suite (Rust and Python).
# This is the README's test command and what CI (.ci/run) calls.
#
# Every stage runs even when an earlier one failed; the failures are listed at
# the end and the exit status is 1 if there was any. Arguments go to pytest.
#   RAGMETER_SKIP_INSTALL=1   use the ragmeter already installed (no pip install)
#   RAGMETER_CONFORMANCE_DIR  where trec_eval's test suite is (default ../shared/conformance/trec_eval)
#   CI=true                   a missing trec_eval suite or browser is a failure, not a skip; installs
#                             llama.cpp's server and runs tests/realserver (never skipped there)
#   RAGMETER_RAY=1            install Ray for tests/test_ray.py (always with CI=true)
#   RAGMETER_ECOSYSTEM=1      install the 'ecosystem' extra (ragas, DeepEval) in target/ecosystem-venv and run
#                             tests/test_ecosystem_real.py there (always with CI=true; about 2 minutes)
#   RAGMETER_REAL_SERVER=1    install llama-cpp-python[server] (built from source the first time, a few
#                             minutes; seconds once pip's cache holds the wheel) and run tests/realserver.
#                             Without it (and without CI) that suite runs only if the server is installed.
set -uo pipefail
cd "$(dirname "$0")/.."

failed=()

# Run a stage; remember its name if it fails.
stage() {
  local name=$1
  shift
  echo "== $name"
  "$@" || failed+=("$name")
}

in_ci() {
  case "${CI:-}" in "" | 0 | false) return 1 ;; *) return 0 ;; esac
}

# Run a long quiet command with its output in a log file and a line every 30 s,
# so that three minutes of compiling do not look like a hang. The log's tail is
# printed if the command fails.
with_progress() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  local pid=$! waited=0
  trap 'kill "$pid" 2>/dev/null' INT TERM
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if ((waited % 30 == 0)); then
      echo "   ... ${waited} s: $(grep -E '^ *(Compiling|Collecting|Building|Installing|Finished)' "$log" | tail -n 1 | sed 's/^ *//' | cut -c1-60)"
    fi
  done
  wait "$pid"
  local status=$?
  trap - INT TERM
  if ((status != 0)); then
    echo "   failed (exit $status); the last lines of $log:"
    tail -n 30 "$log"
  fi
  return "$status"
}

install() {
  mkdir -p target
  local log=target/pip-install.log
  echo "   pip install -e '.[test]': builds the Rust extension in release mode (about 3 minutes the first"
  echo "   time, seconds once target/ holds the build); full output in $log"
  with_progress "$log" python3 -m pip install -v -e '.[test]' && echo "   installed: $(python3 -m pip --version | cut -d' ' -f1-2), ragmeter $(python3 -c 'import ragmeter; print(ragmeter.__version__)')"
}

# The report's browser test needs headless Chromium. Without CI it is skipped
# when Chromium is missing, so Chromium is installed only for CI (the test fails there).
browser() {
  local b
  for b in chromium chromium-browser google-chrome google-chrome-stable chrome; do
    if command -v "$b" >/dev/null 2>&1; then
      echo "   found $b"
      return 0
    fi
  done
  if ! in_ci; then
    echo "   no Chromium: the report's browser test will be skipped (install Debian's chromium, or set CI=true to have this script install it)"
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "   CI is set, Chromium is missing and apt-get is not available: the report's browser test will fail"
    return 1
  fi
  echo "   CI is set and Chromium is missing (the report's browser test would fail): installing Debian's chromium"
  mkdir -p target
  with_progress target/apt-chromium.log \
    bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium'
}

# tests/realserver: the judge against llama.cpp's server (llama-cpp-python[server], pinned) with models
# the tests write with gguf. Built from source: GGML_NATIVE=OFF so that the wheel pip caches on one CPU
# runs on another; LLAVA_BUILD=OFF because the multimodal part is not needed and doubles the build.
LLAMA_CPP_PYTHON_VERSION=0.3.16
GGUF=gguf==0.19.0
# the [server] extra's own dependencies, pinned to the versions tests/realserver passed with
LLAMA_SERVER_DEPS=(fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 sse-starlette==3.7.0 starlette-context==0.3.6
  pydantic-settings==2.14.1)

RAY_VERSION=2.60.0

real_server_wanted() {
  in_ci && return 0
  case "${RAGMETER_REAL_SERVER:-}" in "" | 0 | false) return 1 ;; *) return 0 ;; esac
}

real_server_installed() {
  python3 -c "import llama_cpp.server.app, gguf, llama_cpp; assert llama_cpp.__version__ == '$LLAMA_CPP_PYTHON_VERSION'" \
    >/dev/null 2>&1
}

real_server_install() {
  if real_server_installed; then
    echo "   found llama-cpp-python $(python3 -c 'import llama_cpp; print(llama_cpp.__version__)') and gguf"
    return 0
  fi
  if ! command -v c++ >/dev/null 2>&1; then
    echo "   no C++ compiler: installing Debian's g++"
    with_progress target/apt-gxx.log \
      bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++' || return 1
  fi
  mkdir -p target
  local log=target/pip-llama-cpp.log
  echo "   pip install 'llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION' $GGUF: compiles llama.cpp (about 7 minutes on 2 cores the"
  echo "   first time, seconds once pip's cache holds the wheel); full output in $log"
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
    with_progress "$log" python3 -m pip install -v "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" "$GGUF" "${LLAMA_SERVER_DEPS[@]}"
}

real_server_tests() {
  if ! real_server_wanted && ! real_server_installed; then
    echo "   skipped: llama-cpp-python[server] is not installed (RAGMETER_REAL_SERVER=1 installs it; CI=true always runs this)"
    return 0
  fi
  python3 -m pytest -q tests/realserver
}

# Ray is large (a few hundred MB): installed for CI or when RAGMETER_RAY=1; elsewhere tests/test_ray.py skips.
ray_wanted() {
  in_ci && return 0
  case "${RAGMETER_RAY:-}" in "" | 0 | false) return 1 ;; *) return 0 ;; esac
}

ray_install() {
  if python3 -c "import ray.data" >/dev/null 2>&1; then
    echo "   found ray $(python3 -c 'import ray; print(ray.__version__)')"
    return 0
  fi
  mkdir -p target
  echo "   pip install 'ray[data]==$RAY_VERSION' (about 30 s from pip's cache); full output in target/pip-ray.log"
  with_progress target/pip-ray.log python3 -m pip install "ray[data]==$RAY_VERSION"
}

# ragas and DeepEval (the 'ecosystem' extra) go into a venv of their own that sees the shared packages: DeepEval
# would downgrade rich (a ragmeter dependency) and add four pytest plugins to every test run. The versions are
# scripts/ecosystem-constraints.txt (a pip freeze of that venv; regenerate it when the extra's pins change).
ECOSYSTEM_VENV=target/ecosystem-venv

ecosystem_wanted() {
  in_ci && return 0
  case "${RAGMETER_ECOSYSTEM:-}" in "" | 0 | false) return 1 ;; *) return 0 ;; esac
}

ecosystem_install() {
  local pins
  pins=$(python3 -c '
try:
    import tomllib
except ImportError:
    import tomli as tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["ecosystem"]))') || return 1
  mkdir -p target
  if [ ! -x "$ECOSYSTEM_VENV/bin/python" ]; then
    python3 -m venv --system-site-packages "$ECOSYSTEM_VENV" || return 1
  fi
  # --system-site-packages gives the base interpreter's packages, not those of a venv this script runs in: the
  # ragmeter installed above is made visible by the folder it was imported from, after the venv's own packages.
  local ragmeter_home site
  ragmeter_home=$(python3 -c 'import os, ragmeter; print(os.path.dirname(os.path.dirname(ragmeter.__file__)))') &&
    site=$("$ECOSYSTEM_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
    echo "$ragmeter_home" >"$site/ragmeter-under-test.pth" || return 1
  echo "   pip install $(echo $pins) into $ECOSYSTEM_VENV (about 100 s from pip's cache, ~470 MB); full output in"
  echo "   target/pip-ecosystem.log"
  # shellcheck disable=SC2086 # one requirement per word
  with_progress target/pip-ecosystem.log "$ECOSYSTEM_VENV/bin/python" -m pip install -c scripts/ecosystem-constraints.txt $pins &&
    echo "   installed: $("$ECOSYSTEM_VENV/bin/python" -c 'import importlib.metadata as m; print(", ".join(p + " " + m.version(p) for p in ("ragas", "deepeval", "datasets")))')"
}

# DeepEval's pytest plugins are turned off: they only add output (tests/test_ecosystem_real.py passes with them).
ecosystem_tests() {
  "$ECOSYSTEM_VENV/bin/python" -m pytest -q -p no:deepeval -p no:asyncio -p no:xdist -p no:rerunfailures -p no:repeat \
    tests/test_ecosystem_real.py
}

ecosystem_ignore=()
if ecosystem_wanted; then
  ecosystem_ignore=(--ignore=tests/test_ecosystem_real.py)  # run in its venv below
fi

if [ -n "${RAGMETER_SKIP_INSTALL:-}" ]; then
  echo "== install: skipped (RAGMETER_SKIP_INSTALL is set; using $(python3 -c 'import ragmeter; print(ragmeter.__file__)' 2>&1))"
else
  stage "install" install
fi
stage "chromium (report browser test)" browser
stage "cargo test (ragmeter-core, no Python)" cargo test --quiet -p ragmeter-core
stage "stub check (python/ragmeter/_core.pyi against the compiled module)" \
  python3 -m mypy.stubtest ragmeter._core --allowlist stubtest-allowlist.txt
if ray_wanted; then
  stage "install Ray (tests/test_ray.py: scoring on a local Ray cluster)" ray_install
fi
stage "pytest" python3 -m pytest -q --ignore=tests/realserver "${ecosystem_ignore[@]}" "$@"
if ecosystem_wanted; then
  n_failed=${#failed[@]}
  stage "install ragas and DeepEval (the 'ecosystem' extra) in $ECOSYSTEM_VENV" ecosystem_install
  if ((${#failed[@]} == n_failed)); then
    stage "pytest tests/test_ecosystem_real.py (the real ragas and DeepEval classes, in $ECOSYSTEM_VENV)" ecosystem_tests
  fi
fi
if real_server_wanted; then
  stage "install llama.cpp's server (tests/realserver)" real_server_install
fi
stage "pytest tests/realserver (the judge against llama.cpp's server)" real_server_tests

if ((${#failed[@]})); then
  echo "== FAILED: ${#failed[@]} stage(s):"
  printf '   %s\n' "${failed[@]}"
  exit 1
fi
echo "== all stages passed"
