"""``ragmeter judge``: LLM-judge metrics over a golden set and a run.

The API key is read from ``RAGMETER_API_KEY`` (falling back to
``OPENAI_API_KEY``), never from the command line, and is never written to the
cache, the outputs or the log.

Exit status: 0 when every row was judged (or as many failed as ``--max-failed``
allows); 3 when the results were written but more rows failed (or were skipped
at ``--budget``) than that, or when the run file (``--run``) holds cases that failed
when it was collected; 2 for a configuration error, including an endpoint
that refuses the key, an unknown model, an unreachable endpoint and a cache
that is damaged or cannot be written (nothing is written then); 130/143 when
interrupted (SIGINT/SIGTERM), after saying how far the run got.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HELP = "LLM judge: correctness, faithfulness, relevancy, context precision and recall"

_METRICS = ("correctness", "faithfulness", "answer_relevancy", "context_precision", "context_recall")


def exit_epilog(also_3: str = "") -> str:
    """The exit-status table of ``--help``; ``also_3``: lines (7 spaces in) for a command's other causes of 3."""
    return """exit status:
  0    done: every judge row judged (or no more failed than --max-failed)
  2    usage or configuration error, nothing written: a refused key
       (401/403), an exhausted quota, an unknown model or route (404), an
       endpoint that cannot be reached or never answers, a damaged or
       unwritable cache (see --no-cache and `ragmeter cache repair PATH`)
  3    done, results written, but more rows failed (or were skipped at
       --budget) than --max-failed allows
""" + also_3 + """  130  interrupted (Ctrl-C); 143 terminated (SIGTERM): the message says what
       finished; the cache keeps it and a rerun resumes"""


EPILOG = exit_epilog("""       (or, with --golden and --run, the run file holds cases that failed
       when it was collected: a failed_in_run warning names them)
""")
PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}

class MaxFailed:
    """``--max-failed N`` (rows) or ``--max-failed P%`` (of the rows to judge): how many incomplete rows a run may
    have and still exit 0."""

    def __init__(self, text: str) -> None:
        raw = text.strip()
        self.text = raw
        self.percent = raw.endswith("%")
        try:
            self.value = float(raw[:-1]) if self.percent else int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of rows (3) or a percentage (5%), got {text!r}") \
                from None
        if not self.value >= 0 or (self.percent and self.value > 100):  # NaN too
            raise argparse.ArgumentTypeError(f"must be between 0 and {'100%' if self.percent else 'the row count'}, "
                                             f"got {text!r}")

    def allows(self, incomplete: int, of: int) -> bool:
        if self.percent:
            return incomplete * 100 <= self.value * of
        return incomplete <= self.value


#: option values when neither the command line nor a --preset gives one
DEFAULTS: Dict[str, Any] = {"concurrency": 8, "timeout": 120.0, "max_tokens": 2000, "max_retry_tokens": 8000,
                            "retry_attempts": 6}
#: --preset local: a server on this machine computes one request at a time; concurrent requests only queue there
#: and time out while it keeps computing the abandoned ones, and a small context cannot take large budgets
PRESETS: Dict[str, Dict[str, Any]] = {
    "local": {"concurrency": 1, "timeout": 600.0, "max_tokens": 512, "max_retry_tokens": 2048, "retry_attempts": 3},
}


def apply_preset(args: argparse.Namespace) -> None:
    """Fill the options left unset from ``--preset`` (if any), then from :data:`DEFAULTS`; explicit values win."""
    chosen = PRESETS.get(getattr(args, "preset", None) or "", {})
    for name, default in DEFAULTS.items():
        if getattr(args, name, None) is None:
            setattr(args, name, chosen.get(name, default))


def _default(name: str) -> str:
    local = PRESETS["local"][name]
    return f"default {DEFAULTS[name]:g}, --preset local {local:g}"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during judging; the message says how far the run got (printed by ``cli._guarded``)."""


class _NotCollectRefresh(argparse.Action):
    """``--refresh`` is collect's option; refused here, with what the judge has instead."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        parser.error("--refresh is collect's option (run collect --refresh to ask the system again); the judge "
                     "replays its cache: --refresh-failed re-requests the cached replies that failed to parse, "
                     "--no-cache sends every call again")


def configure(parser: argparse.ArgumentParser, cases: bool = True) -> None:
    """The judge options; ``cases=False`` leaves out ``--cases`` (``ragmeter eval`` needs --golden and --run)."""
    src = parser.add_argument_group("input")
    src.add_argument("--golden", metavar="G", help="golden set (questions, reference answers)")
    src.add_argument("--run", metavar="R", help="run file (answers, retrieved contexts), joined to --golden on id")
    if cases:
        src.add_argument("--cases", metavar="JSONL",
                         help="instead of --golden/--run: one JSON object per line with id, question, "
                              "reference_answer, answer, contexts, category")
    ep = parser.add_argument_group("endpoint (OpenAI-compatible; key from RAGMETER_API_KEY or OPENAI_API_KEY)")
    ep.add_argument("--base-url", required=True, metavar="URL", help="e.g. https://api.openai.com/v1")
    ep.add_argument("--model", required=True, metavar="M", help="judge model")
    ep.add_argument("--embeddings-model", metavar="M",
                    help="embeddings model for answer_relevancy (default: graded judge comparison, no embeddings)")
    ep.add_argument("--embeddings-base-url", metavar="URL", help="embeddings endpoint (default: --base-url)")
    ep.add_argument("--timeout", type=float, metavar="S", help=f"seconds per attempt ({_default('timeout')})")
    ep.add_argument("--preset", choices=tuple(PRESETS), help="defaults for a kind of server: local (a llama.cpp, "
                    "Ollama or vLLM server on this machine): concurrency 1, max-tokens 512, max-retry-tokens 2048, "
                    "retry-attempts 3, timeout 600; options given explicitly win")
    ep.add_argument("--context-size", type=int, metavar="N",
                    help="the judge model's context window in tokens: budget doubling stops there (default: from "
                         "GET /models when the server says, else unknown)")
    ep.add_argument("--json-mode", choices=("auto", "on", "off"), default="auto",
                    help="request JSON output (auto: dropped if the endpoint rejects it)")
    m = parser.add_argument_group("metrics")
    m.add_argument("--metrics", default=",".join(_METRICS), metavar="LIST",
                   help="comma-separated, from " + ",".join(_METRICS) + " (default: all)")
    m.add_argument("--metric-file", action="append", default=[], metavar="TOML",
                   help="custom rubric metrics, one [metrics.<name>] table each (criteria, scale, pass_threshold, "
                        "fields, steps, score_descriptions); added to --metrics")
    m.add_argument("--metric-module", action="append", default=[], metavar="PY",
                   help="custom metrics defined in a Python file (RubricMetric objects, @ragmeter.judge.metric "
                        "functions); added to --metrics")
    m.add_argument("--n-questions", type=int, default=3, metavar="N", help="answer_relevancy questions (default 3)")
    m.add_argument("--relevancy-variant", choices=("hard", "ragas", "soft"), default="ragas",
                   help="answer_relevancy variant put in the score column (all three are kept)")
    m.add_argument("--strict-no-answer", action="store_true",
                   help="score non-committal answers on no-answer cases like any other (default: they score 1)")
    m.add_argument("--precision-against", choices=("auto", "reference", "answer"), default="auto",
                   help="context_precision target (auto: the reference answer when present)")
    m.add_argument("--language", choices=("auto", "en", "zh"), default="auto",
                   help="language of generated text (auto: the question's)")
    lim = parser.add_argument_group("limits, retries, budget")
    lim.add_argument("--concurrency", type=int, metavar="N", help=f"concurrent requests ({_default('concurrency')})")
    lim.add_argument("--rpm", type=float, metavar="N", help="requests per minute")
    lim.add_argument("--tpm", type=float, metavar="N", help="tokens per minute (estimated prompt + max_tokens)")
    add_rate_control(lim)
    lim.add_argument("--max-tokens", type=int, metavar="N", help=f"judge output budget ({_default('max_tokens')})")
    lim.add_argument("--max-retry-tokens", type=int, metavar="N",
                     help="cap when doubling the budget after truncated or empty output "
                          f"({_default('max_retry_tokens')})")
    lim.add_argument("--retry-attempts", type=int, metavar="N",
                     help=f"attempts per call on 429/5xx/time-outs ({_default('retry_attempts')})")
    lim.add_argument("--retry-base-delay", type=float, default=0.5, metavar="S", help="back-off base (default 0.5)")
    lim.add_argument("--retry-max-delay", type=float, default=30.0, metavar="S", help="back-off cap (default 30)")
    lim.add_argument("--retry-after-cap", type=float, default=60.0, metavar="S",
                     help="cap on a server's Retry-After (default 60)")
    lim.add_argument("--budget", type=float, metavar="USD",
                     help="stop launching calls when the judge cost reaches USD; the rest is marked skipped")
    lim.add_argument("--price", metavar="IN,OUT", help="judge model price, USD per million input,output tokens")
    lim.add_argument("--prices", metavar="FILE", help='price table JSON: {"model": {"input": X, "output": Y}}')
    lim.add_argument("--max-failed", type=MaxFailed, default=MaxFailed("0"), metavar="N|P%",
                     help="rows that may fail (or be skipped at --budget) before the exit status is 3: a count or a "
                          "percentage of the rows to judge (default 0)")
    out = parser.add_argument_group("output")
    out.add_argument("--cache", default=".ragmeter/cache.sqlite", metavar="PATH",
                     help="SQLite cache of the replies received: a rerun replays them instead of paying again "
                          "(default .ragmeter/cache.sqlite)")
    out.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    out.add_argument("--refresh-failed", action="store_true",
                     help="re-request cached replies that failed to parse (after the repair turn) instead of "
                          "replaying them; the new replies replace them in the cache")
    # argparse would take collect's --refresh (call everything again) for an abbreviation of --refresh-failed
    out.add_argument("--refresh", nargs=0, action=_NotCollectRefresh, help=argparse.SUPPRESS)
    out.add_argument("--dry-run", action="store_true", help="estimate calls, tokens and cost; send nothing")
    out.add_argument("--out", default="ragmeter-judge", metavar="DIR",
                     help="writes DIR/judge.parquet and DIR/judge_summary.json (default ragmeter-judge)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    out.add_argument("--json", action="store_true",
                     help="print the summary (or the dry run's estimate) as JSON on stdout, and nothing else there")
    out.add_argument("-v", "--verbose", action="store_true", help="log every retry to stderr")


def _read_cases(path: str) -> List[Dict[str, Any]]:
    from ragmeter.errors import input_error

    import io
    from pathlib import Path

    from ragmeter._sniff import to_utf8

    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise input_error(path, None, f"cannot read: {exc.strerror}") from None
    # the shared reading of text input: a byte-order mark or UTF-16 read, else the line, column and encoding of
    # what is not UTF-8 (counting comment lines too, which the records do not)
    _, text = to_utf8(Path(path), raw, "judge case files")
    # one diagnosis of a file of another shape (a JSON array, pretty-printed objects, CSV), as the golden set's
    _refuse_other_shapes(Path(path), text)
    records: List[Dict[str, Any]] = []
    _parse_lines(path, io.StringIO(text), records)
    if not records:  # judged, it would be 'scored 0/0' for every metric and exit 0: nothing measured
        if not text.strip():
            raise input_error(path, None, "is empty; judge case files are JSON Lines (one object per line)")
        raise input_error(path, None, "no cases (the file has only comments)")
    return records


def _refuse_other_shapes(path: Path, text: str) -> None:
    """An InputError with one diagnosis when ``text`` is not JSON Lines as a whole: a JSON array, JSON objects
    spread over several lines, or a first record line in another format (CSV, TSV, YAML, ...); line by line,
    these were 'line 1: expected a JSON object' or 'invalid JSON at column 1'."""
    import json

    from ragmeter._sniff import json_array_diagnosis, spread_object_diagnosis, text_shape_diagnosis
    from ragmeter.errors import InputError

    what = "judge case files"
    shape = json_array_diagnosis(path, text, what) or spread_object_diagnosis(path, text, what)
    if shape is None:
        first = next((line.strip() for line in text.splitlines()
                      if line.strip() and not line.lstrip().startswith(("#", "//"))), None)
        try:
            if first is not None:
                json.loads(first)
        except (json.JSONDecodeError, RecursionError):
            shape = text_shape_diagnosis(path, first, what)
    if shape is not None:
        raise InputError(shape)


def _parse_lines(path: str, f: Any, records: List[Dict[str, Any]]) -> None:
    from ragmeter.errors import input_error

    from ragmeter._sniff import MAX_DEPTH, depth_exceeded_at
    from ragmeter.dataset import _SURROGATE_ESCAPE, ID_NAMES, QUESTION_NAMES, _lone_surrogate, _surrogate_message

    first_line: Dict[str, int] = {}
    for n, line in enumerate(f, start=1):
        if not line.strip() or line.lstrip().startswith(("#", "//")):
            continue
        if depth_exceeded_at(line) is not None:  # json.loads would recurse until RecursionError
            raise input_error(path, n, f"JSON nested deeper than {MAX_DEPTH} levels")
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise input_error(path, n, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(rec, dict):
            raise input_error(path, n, "expected a JSON object")
        if _SURROGATE_ESCAPE.search(line):  # only such an escape decodes to a lone surrogate
            found = _lone_surrogate(rec)
            if found is not None:
                raise input_error(path, n, _surrogate_message(found))
        for field, names in (("id", ID_NAMES), ("question", QUESTION_NAMES)):  # any spelling Case reads
            if all(rec.get(name) in (None, "") for name in names):
                also = f" (or {', '.join(repr(x) for x in names[1:])})"
                raise input_error(path, n, f"missing field {field!r}{also}")
        case_id = next(rec[name] for name in ID_NAMES if rec.get(name) not in (None, ""))
        if isinstance(case_id, bool) or not isinstance(case_id, (str, int)):  # as the golden set and the run read it
            raise input_error(path, n, f"'id' must be a string or an integer, got {_json_kind(case_id)}")
        if str(case_id) in first_line:  # judged twice under one id, the rows could not be told apart
            raise input_error(path, n, f"duplicate id {str(case_id)!r} (first at {path}:{first_line[str(case_id)]})")
        first_line[str(case_id)] = n
        question = next(rec[name] for name in QUESTION_NAMES if rec.get(name) not in (None, ""))
        if not isinstance(question, str):
            raise input_error(path, n, f"'question' must be a string, got {_json_kind(question)}")
        if rec.get("contexts") is not None and not isinstance(rec["contexts"], list):
            raise input_error(path, n, "field 'contexts' must be a list of strings")
        _check_texts(path, n, rec)
        records.append(rec)


def _check_texts(path: str, n: int, rec: Dict[str, Any]) -> None:
    """An InputError naming the line and field when the answer, the reference (under any spelling the judge
    reads, the first given) or a context is not a string: the judge would otherwise be sent its text ('nan',
    '42', "['a', 'b']") and paid to grade it. null is an absent field, as everywhere."""
    from ragmeter.dataset import ANSWER_NAMES, GOLDEN_ALIASES
    from ragmeter.errors import input_error

    for names in (ANSWER_NAMES, GOLDEN_ALIASES["reference_answer"]):
        name = next((name for name in names if rec.get(name) is not None), None)
        if name is not None and not isinstance(rec[name], str):
            raise input_error(path, n, f"{name!r} must be a string, got {_json_kind(rec[name])}")
    for i, context in enumerate(rec.get("contexts") or []):
        if context is not None and not isinstance(context, str):
            raise input_error(path, n, f"'contexts[{i}]' must be a string, got {_json_kind(context)}")


def _json_kind(value: Any) -> str:
    """What a JSON value is, for an error message."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "a string" if isinstance(value, str) else type(value).__name__


def _join(golden_path: str, run_path: str) -> Tuple[List[Dict[str, Any]], List[Tuple[str, str]]]:
    """Golden x run on id, as ``eval`` joins them (aliases, id checks, one case missing from the run marked
    rather than dropped): one judge record per golden case, and the (id, failure kind) of each case the run file
    records as failed when it was collected (``run_error``)."""
    import polars as pl

    from ragmeter.evaluation import _judge_records
    from ragmeter.retrieval import _prepare

    _golden, _run, joined, _missing = _prepare(golden_path, run_path)
    failed = joined.filter(pl.col("run_error").is_not_null()).select("id", "run_error")
    return _judge_records(joined), list(failed.iter_rows())


def _warn_failed_in_run(failed: List[Tuple[str, str]]) -> int:
    """Name on stderr the cases the run file records as failed (no answer, so none is judged); 3 when there
    are any (:func:`ragmeter.cli._inputs.failed_in_run_exit`), else 0."""
    if not failed:
        return 0
    from rich.console import Console

    from ragmeter.cli._tables import print_warning
    from ragmeter.retrieval import failed_in_run_warning

    entry = failed_in_run_warning([i for i, _kind in failed], [kind for _i, kind in failed],
                                  "they have no answer to judge")
    print_warning(entry["message"], Console(stderr=True))
    from ragmeter.cli._inputs import failed_in_run_exit

    return failed_in_run_exit({"failed": len(failed)})


def _every_run_case_failed(records: List[Dict[str, Any]], failed_in_run: List[Tuple[str, str]]) -> bool:
    """Whether the run file holds cases and every one of them failed when it was collected."""
    in_run = [r for r in records if not r.get("missing_run")]
    return bool(in_run) and len(failed_in_run) == len(in_run)


def _check_http_url(flag: str, url: Optional[str]) -> None:
    from ragmeter.judge.urls import check_http_url

    check_http_url(flag, url)  # before the cache is checked; JudgeConfig checks it again for the Python front


def build_config(args: argparse.Namespace) -> Any:
    """A :class:`ragmeter.judge.JudgeConfig` from the judge options (shared with ``ragmeter eval``)."""
    import logging

    from ragmeter.errors import InputError
    from ragmeter.judge import JudgeConfig, PriceTable, RetryPolicy
    from ragmeter.judge.retry import check_retry_attempts

    apply_preset(args)
    for flag, url in (("--base-url", args.base_url), ("--embeddings-base-url", args.embeddings_base_url)):
        _check_http_url(flag, url)
    if not args.no_cache:
        from ragmeter.cli._inputs import check_out

        check_out(args.cache, folder=False, flag="--cache")  # `--cache "$CACHE"` with CACHE unset is not '.'
    metrics = with_custom_metrics([m.strip() for m in args.metrics.split(",") if m.strip()], args)
    prices = PriceTable.from_file(args.prices) if args.prices else PriceTable()
    if args.price:
        try:
            pin, pout = (float(x) for x in args.price.split(","))
            prices = PriceTable({**prices.prices, args.model: (pin, pout)}, defaults=False)
        except ValueError:  # not two numbers, or a negative or NaN one
            raise InputError(f"--price: expected IN,OUT in USD per million tokens, each a number >= 0, got "
                             f"{args.price!r}") from None
    attempts = check_retry_attempts(args.retry_attempts)
    try:
        policy = RetryPolicy(max_attempts=attempts, base_delay=args.retry_base_delay,
                             max_delay=args.retry_max_delay, max_retry_after=args.retry_after_cap)
    except ValueError as exc:
        raise InputError(f"retry settings: {exc}") from None
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="ragmeter: %(message)s")
    from ragmeter.judge import Tally

    return JudgeConfig(
        base_url=args.base_url, model=args.model, metrics=metrics, concurrency=args.concurrency, rpm=args.rpm,
        tpm=args.tpm, rate_control=args.rate_control, max_tokens=args.max_tokens,
        max_retry_tokens=args.max_retry_tokens,
        cache=None if args.no_cache else args.cache, refresh_failed=bool(getattr(args, "refresh_failed", False)),
        budget=args.budget, dry_run=args.dry_run, prices=prices,
        embeddings_model=args.embeddings_model, embeddings_base_url=args.embeddings_base_url,
        n_questions=args.n_questions, relevancy_variant=args.relevancy_variant,
        honest_no_answer=not args.strict_no_answer, precision_against=args.precision_against,
        language=args.language, timeout=args.timeout, json_mode=args.json_mode, retry=policy,
        progress=not args.no_progress and not args.dry_run, context_size=getattr(args, "context_size", None),
        spill_dir=Path(args.out).resolve().parent, tally=Tally(),
    )


def add_rate_control(group: Any, ceilings: str = "--rpm, --tpm and --concurrency") -> None:
    """``--rate-control``, shared by judge, eval and collect; ``ceilings``: the command's own limit flags."""
    group.add_argument("--rate-control", choices=("adaptive", "fixed"), default="adaptive",
                       help="adaptive (default): learn the provider's limit, a request rate cut on 429/529 and "
                            "regrown on success, fewer requests in flight when a server queues or times out; "
                            "fixed: the concurrency as given, every 429's Retry-After pauses all new requests. "
                            f"{ceilings} are ceilings either way (docs/scale-out.md)")


def with_custom_metrics(names: List[Any], args: argparse.Namespace) -> List[Any]:
    """``--metrics`` plus the metrics of ``--metric-file`` / ``--metric-module``: a custom name already in
    ``--metrics`` takes its place there, the others are appended."""
    from ragmeter.errors import InputError
    from ragmeter.judge.custom import load_metric_file, load_metric_module

    custom = [(path, m) for path in getattr(args, "metric_file", None) or [] for m in load_metric_file(path)]
    custom += [(path, m) for path in getattr(args, "metric_module", None) or [] for m in load_metric_module(path)]
    out: List[Any] = list(names)
    defined: Dict[str, str] = {}
    for path, m in custom:
        # two definitions of one name: the registry would keep the last, and judge it twice per case
        if m.name in defined:
            raise InputError(f"{path}: metric {m.name!r} is also defined in {defined[m.name]}; give one of them "
                             f"another name")
        defined[m.name] = str(path)
        if m.name in out:
            out[out.index(m.name)] = m
        else:
            out.append(m)
    return out


def print_estimate(est: Dict[str, Any], n_metrics: int) -> None:
    """Print a dry run's estimate (``ragmeter judge --dry-run``, ``ragmeter eval --dry-run``)."""
    cost = "unknown (no price for this model)" if est.get("cost_usd") is None else f"${est['cost_usd']:.4f}"
    cmax = "" if est.get("cost_usd_max") is None else f" (at most ${est['cost_usd_max']:.4f} if every reply " \
                                                       f"used --max-tokens)"
    from ragmeter._text import hanging

    repeats = f" x {est['repeat']} repeats" if est.get("repeat", 1) > 1 else ""
    lines = [f"dry run: {est.get('n_cases')} cases x {n_metrics} metrics{repeats}: {est.get('calls')} calls to "
             f"send, {est.get('cached_calls')} already cached"]
    if repeats:
        first, further = est["per_repeat"]["first"], est["per_repeat"]["each_further"]
        lines.append(f"  repeat 1: {first['calls']} calls ({first['cached_calls']} cached); repeats "
                     f"2..{est['repeat']} bypass the cache: {further['calls']} calls each")
    lines.append(f"  tokens ~{est.get('prompt_tokens')} in, ~{est.get('completion_tokens')} out; cost ~{cost}{cmax}")
    for line in hanging(lines):  # 80 columns, as every command's prose
        print(line)
    for metric, m in (est.get("per_metric") or {}).items():
        print(f"  {metric:<18} {m['calls']:>6} calls  {m['cached_calls']:>6} cached  "
              f"~{m['prompt_tokens']} in  ~{m['completion_tokens']} out")


def judge_lines(summary: Dict[str, Any], width: int = 80) -> List[str]:
    """The per-metric console summary (``judge`` and ``eval``): mean over scored rows (``n/a`` when none), counts,
    and the failed and skipped rows grouped by kind with one example message each; every line within ``width``."""
    from ragmeter._text import wrap
    from ragmeter.report.data import pass_rate_text

    lines: List[str] = []
    for metric, m in summary["metrics"].items():
        mean = "n/a" if m["mean"] is None else f"{m['mean']:.3f}"
        scale = " (1-5)" if m.get("scale") == "1-5" else ""
        head = (f"  {metric:<17} mean {mean:>5}{scale}  scored {m['n_scored']}/{m['n_total']}  "
                f"failed {m['n_failed']}  skipped {m['n_skipped']}")
        # a long metric name (a custom metric's) or large counts: wrapped, the rest indented under the name
        lines += [head] if len(head) <= width else wrap(head.strip(), width, indent="  ", subsequent="      ")
        passed = pass_rate_text(m)
        if passed:
            lines.append(f"    {passed}")
        if m.get("correct_rate") is not None:
            lines.append(f"    correct {m['correct_rate']:.1%} ({m['n_correct']} of {m['correct_rate_denominator']}; "
                         f"a failed row is not correct)")
        elif metric == "correctness" and m.get("n_failed"):
            lines.append(f"    correct n/a (no row scored, {m['n_failed']} failed)")
        for label, groups in (("failed", m.get("failures") or {}), ("skipped", m.get("skips") or {})):
            for kind, g in groups.items():
                lines += _example_lines(f"    {label} {g['count']} {kind}: ", g.get("example") or "", width)
    return lines


#: lines an example message of a failed or skipped group may take: whole when short (a missing field's name is at
#: its end), cut when it is a server's page
_EXAMPLE_LINES = 3


def _example_lines(head: str, example: str, width: int) -> List[str]:
    """``head`` and its example message, wrapped under the head within ``width``, the last line cut with "…"."""
    from ragmeter._text import wrap

    indent = head[:len(head) - len(head.lstrip())]
    lines = wrap(head.strip() + " " + " ".join(example.split()), width, indent=indent, subsequent=" " * 6)
    if len(lines) <= _EXAMPLE_LINES:
        return lines
    rest = " ".join(" ".join(lines[_EXAMPLE_LINES - 1:]).split())
    return lines[:_EXAMPLE_LINES - 1] + [" " * 6 + _shorten(rest, width - 6)]


def _shorten(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` terminal columns (a CJK character takes two), cut with "…"
    (the progress line's :func:`ragmeter.judge.runner.fit_cells`)."""
    from ragmeter.judge.runner import fit_cells

    text = " ".join(text.split())
    whole = fit_cells(text, width)
    return whole if whole == text else (fit_cells(text, width - 1) or text[:1]) + "…"


def cost_lines(s: Dict[str, Any]) -> List[str]:
    """The cost and request counts of a judge summary, within 80 columns; says when the endpoint sent no usage
    for some replies (their tokens, and so the cost, are estimates)."""
    from ragmeter._text import hanging

    jc = "n/a" if s["judge_cost_usd"] is None else f"${s['judge_cost_usd']:.4f}"
    sc = "n/a" if s["system_cost_usd"] is None else f"${s['system_cost_usd']:.4f}"
    refreshed = f", {s['refreshed_calls']} failed replies re-requested" if s.get("refreshed_calls") else ""
    lines = [f"  judge cost {jc} (system cost {sc}); {s['requests']} requests, {s['retries']} retries, "
             f"{s['cached_calls']} cached calls{refreshed}"]
    if s.get("usage_estimated_requests"):
        lines.append(f"  tokens and cost estimated for {s['usage_estimated_requests']} of {s['requests']} requests: "
                     f"the endpoint sent no usage for them")
    return hanging(lines)


def incomplete_exit(summary: Optional[Dict[str, Any]], limit: MaxFailed, out: Any) -> int:
    """3 when more rows are incomplete (failed, or skipped at --budget) than ``--max-failed`` allows, else 0."""
    inc = (summary or {}).get("incomplete")
    if not inc or limit.allows(inc["rows"], inc["of"]):
        return 0
    print(f"ragmeter: incomplete: {inc['rows']} of {inc['of']} judge rows were not judged ({inc['failed']} failed, "
          f"{inc['skipped_budget']} skipped at --budget), more than --max-failed {limit.text} allows; the results in "
          f"{out} say which", file=sys.stderr)
    return 3


def judged(call: Any, cfg: Any) -> Any:
    """``call()``, turning Ctrl-C / SIGTERM into :class:`Interrupted` with what the run finished."""
    try:
        return call()
    except KeyboardInterrupt as exc:
        tally = getattr(cfg, "tally", None)
        if str(exc):  # said by the call (the judge's tally, or ragmeter.evaluate over all its repeats)
            raise Interrupted(str(exc)) from None
        raise Interrupted(tally.message() if tally is not None and tally.rows_total else "") from None


def run(args: argparse.Namespace) -> int:
    from ragmeter._io import strict_json
    from ragmeter.errors import InputError
    from ragmeter.judge import run_sync

    if args.cases and (args.golden or args.run):
        raise InputError("pass either --cases or --golden and --run, not both")
    if not args.dry_run:  # a dry run writes nothing
        from ragmeter.cli._inputs import check_out

        check_out(args.out, files=("judge.parquet", "judge_summary.json"))  # before anything is judged
    failed_in_run: List[Tuple[str, str]] = []
    if args.cases:
        records = _read_cases(args.cases)
    elif args.golden and args.run:
        records, failed_in_run = _join(args.golden, args.run)
    else:
        raise InputError("--golden G and --run R are required (or --cases JSONL)")
    cfg = build_config(args)
    if not args.cases:  # a custom metric's own fields (a golden set's 'policy'), read as eval reads them
        from ragmeter.evaluation import _with_extra_fields

        records = _with_extra_fields(records, cfg, args.golden, args.run)
    metrics = list(cfg.metrics)
    result = judged(lambda: run_sync(records, cfg), cfg)
    if args.dry_run:
        if args.json:
            print(strict_json(result.estimate or {}))
        else:
            print_estimate(result.estimate or {}, len(metrics))
        return 0
    s = result.summary
    from ragmeter.judge.runner import refuse_nothing_judged

    refuse_nothing_judged(s, len(records), len(metrics), _every_run_case_failed(records, failed_in_run))
    out = result.write(args.out)
    if args.json:  # the file's content, as eval's --json prints its summary.json
        print(strict_json(result.file_summary()))
        return max(incomplete_exit(s, args.max_failed, out), _warn_failed_in_run(failed_in_run))
    print(f"wrote {out / 'judge.parquet'} and {out / 'judge_summary.json'}")
    for line in judge_lines(s):
        print(line)
    for line in cost_lines(s):
        print(line)
    if s.get("budget_reached"):
        print("  --budget reached: remaining rows are marked skipped", file=sys.stderr)
    return max(incomplete_exit(s, args.max_failed, out), _warn_failed_in_run(failed_in_run))
