"""``ragmeter demo``: the main job on the bundled example, offline.

The answers are judged by **example data**: scripted correctness verdicts (``_example/judge_replay.jsonl``)
that a loopback endpoint replays through the real judge engine, so the demo runs without a model or a network.
A filled review sheet (``_example/review_filled.csv``, also example data) is then imported, and the demo
prints and reports the judge's calibration against it.
"""
from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path
from typing import Any, Dict, Optional

HELP = "score, sweep, judge (scripted example verdicts, offline) and calibrate the bundled example; write a report"

OUTPUTS = ("cases.parquet", "chunks.parquet", "judge.parquet", "sweep.parquet", "summary.json", "warnings.json",
           "review.parquet", "report.html", "report.md", "review/")


def example_dir() -> Path:
    """The bundled example, shipped inside the package (``ragmeter/_example``)."""
    here = Path(__file__).resolve().parent.parent / "_example"
    if not (here / "golden.jsonl").exists():
        from ragmeter.errors import InputError

        raise InputError(f"bundled example not found at {here} (a broken installation? reinstall ragmeter)")
    return here


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="ragmeter-demo", metavar="DIR", help="output folder (default ./ragmeter-demo)")
    parser.add_argument("--k", type=int, default=5, help="cut-off (default 5)")


def _jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith(("#", "//"))]


class ReplayJudge:
    """A loopback OpenAI-compatible endpoint answering each correctness call with the case's scripted verdict."""

    def __init__(self, example: Path) -> None:
        by_id = {v["id"]: v for v in _jsonl(example / "judge_replay.jsonl")}
        self.verdicts: Dict[str, Dict[str, Any]] = {
            g["question"]: by_id[g["id"]] for g in _jsonl(example / "golden.jsonl") if g["id"] in by_id}
        self.port = 0
        self._loop: Optional[Any] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _app(self) -> Any:
        from aiohttp import web

        # kept: a reader that finds no command in summary.json (an earlier version) tells the demo's folder by it
        from ragmeter.report.data import DEMO_JUDGE_MODEL as REPLAY_MODEL

        async def models(request: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": REPLAY_MODEL, "object": "model"}]})

        async def chat(request: web.Request) -> web.Response:
            body = await request.json()
            payload = json.loads(body["messages"][-1]["content"])
            verdict = self.verdicts.get(payload.get("question"))
            content = json.dumps({k: verdict[k] for k in ("reason", "score", "correct")} if verdict else {})
            return web.json_response({
                "id": "replay", "object": "chat.completion", "model": REPLAY_MODEL,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})

        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/chat/completions", chat)
        return app

    def __enter__(self) -> "ReplayJudge":
        import asyncio

        from aiohttp import web

        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(self._app(), access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True, name="ragmeter-demo-judge")
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


def run(args: argparse.Namespace) -> int:
    import polars as pl
    from rich.markup import escape

    from ragmeter.cli._tables import make_console, print_diagnosis, print_prose, print_score, print_sweep
    from ragmeter._io import written_by
    from ragmeter.evaluation import evaluate
    from ragmeter.judge import JudgeConfig
    from ragmeter.report.data import DEMO_JUDGE_MODEL as REPLAY_MODEL
    from ragmeter.review import export_sheet, import_sheet
    from ragmeter.review.export import refuse_filled_sheet
    from ragmeter.review.render import text_lines

    from ragmeter.cli._inputs import check_k_flag, check_out

    check_k_flag(args.k)
    check_out(args.out)
    check_out(Path(args.out) / "review")  # the sheet's folder is written after the results: a file there is said first
    ex = example_dir()
    # checked before anything is written: the demo would otherwise overwrite its tables, then stop at the sheet
    refuse_filled_sheet(Path(args.out) / "review", "--out another folder")
    golden, run_file = ex / "golden.jsonl", ex / "run.jsonl"
    console = make_console()
    console.print(f"[bold]ragmeter demo[/] on the bundled example: {golden.name} + {run_file.name}")
    console.print(f"(in {escape(str(ex))})", markup=True, highlight=False)
    with ReplayJudge(ex) as replay:
        judge = JudgeConfig(base_url=replay.base_url, model=REPLAY_MODEL, metrics=["correctness"], cache=None,
                            progress=False, api_key="example-replay")
        result = evaluate(golden, run_file, k=args.k, judge=judge, thresholds=[0.0, 0.1, 0.2])
    # the folder names the demo as its writer: advice on a damaged copy says to run the demo again, not eval
    result.summary.update(written_by("demo"))
    result.write(args.out)
    summary = result.summary
    print_score(summary["retrieval"], out_dir=None, console=console)
    print_sweep(pl.read_parquet(Path(args.out) / "sweep.parquet"), args.k, console=console)
    correctness = ((summary.get("judge") or {}).get("metrics") or {}).get("correctness") or {}
    print_prose([f"answers judged by scripted example verdicts (judge_replay.jsonl, example data replayed offline, "
                 f"not a model): {correctness.get('n_scored')}/{correctness.get('n_total')} scored; "
                 "`ragmeter eval --base-url URL --model M` judges with a real model"], console)
    print_diagnosis(summary.get("diagnosis"), console)
    export_sheet(args.out, Path(args.out) / "review", random_n=4)
    section = import_sheet(args.out, ex / "review_filled.csv")
    print_prose(["review sheet filled by an example reviewer (review_filled.csv, example data):",
                 *text_lines(section)], console)
    out = Path(args.out).resolve()
    print_prose([f"wrote {out}/: {', '.join(OUTPUTS)}", f"open {out / 'report.html'} in a browser for the report"],
                console)
    return 0
