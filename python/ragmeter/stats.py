"""Statistics for evaluation results: bootstrap intervals, McNemar's test, detectable effects.

Everything here is seeded and reproducible: the same inputs and ``seed`` give the
same interval on every machine and with any number of worker threads.

Conventions
-----------
* **Nulls are not scores.** A ``None`` or ``NaN`` value is an unscored case (an
  unlabelled case for retrieval metrics, a failed or skipped judge call). It is
  excluded from the mean and from the bootstrap, but it is still counted in
  ``n_total``; it is never turned into 0 or 1.
* **Percentile bootstrap.** A 95% interval is the 2.5th and 97.5th percentile of
  the resampled means (``n_resamples`` resamples of the cases, with replacement).
  For a ratio such as "mean over scored cases" each resample's mean is
  ``sum(weights * values) / sum(weights * scored)``.
* **Paired.** A paired difference is taken per case (``candidate - baseline``)
  over the cases scored in *both* runs, and those differences are resampled
  together, so the interval reflects case-level noise and not run-level noise.

Speed
-----
Resampling ``n`` cases ``B`` times is ``n * B`` random draws (10^9 for 100,000
cases and 10,000 resamples). Two paths, both exact bootstraps:

* when the rows to resample take few distinct values (binary metrics such as
  hit or correct, ranks, 1-5 grades), a resample is a multinomial draw over the
  distinct rows: ``O(B * distinct)`` work;
* otherwise every resample draws ``n`` indices and counts them per case, and
  each column's resampled sum is the dot product of those counts with the
  column (all metrics and groups share the same resamples). This runs in the
  Rust kernel ``ragmeter._core.bootstrap_means`` (xoshiro256++, one seed per
  block of 16 resamples derived from ``seed``, parallel over blocks with the
  GIL released; bit-identical for a seed whatever the thread count). The
  numpy implementation of the same scheme (``engine="numpy"``: SFC64 chunks,
  ``bincount``, one matrix product) is kept as the reference; the two draw
  different resamples, so they agree in distribution, not bit for bit.
"""
from __future__ import annotations

import ctypes
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    "ENGINES",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "Aggregate",
    "aggregate",
    "bootstrap_ci",
    "bootstrap_means",
    "paired_bootstrap_ci",
    "holm_adjust",
    "paired_differences",
    "mcnemar_exact",
    "mcnemar",
    "min_detectable_difference",
    "min_detectable_difference_proportion",
    "percentile_interval",
    "to_float_array",
]

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 20240501
#: fewer resamples give no 95% percentile interval worth the name: compare and the reports refuse them
MIN_RESAMPLES = 100
#: rows with at most this many distinct values use the multinomial path
_DISTINCT_LIMIT = 256
#: resamples per chunk on the general path
_CHUNK = 64
#: ``engine=`` values of :func:`bootstrap_means`: "auto" uses the Rust kernel when it can
ENGINES = ("auto", "rust", "numpy")


#: the most worker threads a bootstrap call takes (each is an OS thread: a million would exhaust the machine)
MAX_THREADS = 1024


def _rust_kernel() -> Any:
    """``ragmeter._core`` if it has the bootstrap kernel (an older build may not)."""
    try:
        from ragmeter import _core
    except ImportError:  # pragma: no cover - the extension is part of the package
        return None
    return _core if hasattr(_core, "bootstrap_means") else None


def _use_rust(engine: str, n: int) -> bool:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}")
    if engine == "numpy":
        return False
    ok = _rust_kernel() is not None and n < (1 << 24)
    if engine == "rust" and not ok:
        raise RuntimeError("the Rust bootstrap kernel is not available (rebuild ragmeter) or n >= 2^24")
    return ok

ArrayLike = Union[Sequence[Any], np.ndarray, Any]


# --------------------------------------------------------------------------- inputs


def to_float_array(values: ArrayLike) -> np.ndarray:
    """A float64 array with NaN for every null (None, NaN, or a Polars/pyarrow null).

    Booleans become 0.0 / 1.0. A masked entry of a numpy masked array is a null too (never its stored value).
    """
    if isinstance(values, np.ma.MaskedArray):
        return np.ma.filled(values.astype(np.float64), np.nan)
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        # polars Series / pyarrow arrays: cast through float so nulls become NaN
        try:
            import polars as pl

            if isinstance(values, pl.Series):
                return values.cast(pl.Float64).to_numpy().astype(np.float64, copy=True)
        except ImportError:  # pragma: no cover
            pass
        values = values.to_numpy(zero_copy_only=False) if hasattr(values, "type") else values.to_numpy()
    arr = np.asarray(values)
    if arr.dtype == object:
        arr = np.array([_float_or_nan(v) for v in arr.ravel()], dtype=np.float64).reshape(arr.shape)
    return np.array(arr, dtype=np.float64, copy=True)


def _float_or_nan(value: Any) -> float:
    """``float(value)``, NaN for a null: None, or pandas' ``pd.NA`` / ``NaT`` (a nullable boolean or integer
    column's null, which ``float()`` refuses)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return math.nan
    return float(value)


# --------------------------------------------------------------------------- bootstrap engine


def check_resampling(n_resamples: Any, seed: Any, names: Tuple[str, str] = ("n_resamples", "seed")) -> Tuple[int, Optional[int]]:
    """``n_resamples`` (an integer of at least :data:`MIN_RESAMPLES`) and ``seed`` (an integer or None) of a
    comparison or a report, checked; an :class:`~ragmeter.errors.InputError` names them as ``names`` says."""
    from ragmeter._args import check_arg

    return (check_arg(names[0], n_resamples, "int", low=MIN_RESAMPLES),
            check_arg(names[1], seed, "int", optional=True))


def _child_seeds(seed: int, n: int) -> List[np.random.SeedSequence]:
    # taken modulo 2**64 as the Rust kernel takes it: a negative seed is a seed on every path
    return np.random.SeedSequence(seed % 2**64).spawn(n)


def resample_counts(
    n: int, n_resamples: int, seed: int, chunk: int = _CHUNK, *, engine: str = "auto"
) -> Iterable[np.ndarray]:
    """Yield the per-case counts (``chunk x n``, float32) of each chunk of resamples.

    This is the general path's resampling (of the engine ``engine`` selects),
    exposed so tests can check the reduction against a plain-Python loop over
    the very same counts. With groups the Rust kernel applies them to the cases
    in stable group order (in input order without groups).
    """
    if _use_rust(engine, n):
        counts = _rust_kernel().bootstrap_counts(n, n_resamples, seed % 2**64)
        for s in range(0, n_resamples, chunk):
            yield counts[s : s + chunk].astype(np.float32)
        return
    n_chunks = -(-n_resamples // chunk)
    for j, ss in enumerate(_child_seeds(seed, n_chunks)):
        c = min(chunk, n_resamples - j * chunk)
        out = np.empty((c, n), dtype=np.float32)
        _chunk_counts(n, ss, out)
        yield out


def _chunk_counts(n: int, ss: np.random.SeedSequence, out: np.ndarray) -> None:
    """Fill ``out`` (c x n) with the counts of c resamples of n cases with replacement."""
    # SFC64: the fastest of numpy's bit generators (~30% faster than PCG64 here),
    # and random-number generation is most of the cost
    rng = np.random.Generator(np.random.SFC64(ss))
    idx = rng.integers(0, n, size=out.shape, dtype=np.int64)  # unbiased (Lemire), releases the GIL
    for r in range(out.shape[0]):
        out[r] = np.bincount(idx[r], minlength=n)



@contextmanager
def _blas_threads(n: int) -> Iterator[None]:
    """Limit OpenBLAS to ``n`` threads inside the block (best effort, no dependency).

    The bootstrap runs its own worker threads, each doing small matrix
    products; letting OpenBLAS spawn threads for each of them oversubscribes
    the CPUs (10x slower on a busy 2-core machine). If no OpenBLAS is found
    the block runs unchanged.
    """
    handles = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            paths = sorted({line.split()[-1] for line in fh if "openblas" in line.lower() and "/" in line})
    except OSError:
        paths = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    handles.append((get, put, int(get())))
                    break
            else:
                continue
            break
    try:
        for _, put, _old in handles:
            put(ctypes.c_int(n))
        yield
    finally:
        for _, put, old in handles:
            put(ctypes.c_int(old))


def _general_dtype(n: int, n_resamples: int) -> type:
    """What the general numpy path sums in: float32 halves the product's cost; small inputs use float64 (cheap
    anyway)."""
    return np.float32 if n * n_resamples > 10**8 else np.float64


def _exact_centres(data: np.ndarray, scored: np.ndarray) -> np.ndarray:
    """Per column, what float64 sums are centred on: a constant column's value (every residual 0: each resample's
    mean is that value to the bit), 0 otherwise. Not the mean: ``s * c + (-c * s)`` is not 0 in floating point,
    and a resample of whole-number deltas (-1, 0, 1) whose mean is 0 came out as 3.5e-18, an interval
    bound that excluded 0."""
    centre = np.zeros(data.shape[1])
    for j in range(data.shape[1]):
        values = data[scored[:, j], j]
        if values.size and (values == values[0]).all():
            centre[j] = values[0]
    return centre


def _sums_general(
    design: np.ndarray, bounds: List[Tuple[int, int]], n_resamples: int, seed: int, threads: Optional[int]
) -> np.ndarray:
    """Resampled column sums per block of rows: ``(n_resamples, n_blocks, k)``."""
    n, k = design.shape
    chunk = _CHUNK
    n_chunks = -(-n_resamples // chunk)
    seeds = _child_seeds(seed, n_chunks)
    dtype = _general_dtype(n, n_resamples)
    data32 = np.ascontiguousarray(design, dtype=dtype)
    out = np.empty((n_resamples, len(bounds), k), dtype=np.float64)
    local = threading.local()

    def work(j: int) -> None:
        c = min(chunk, n_resamples - j * chunk)
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = np.empty((chunk, n), dtype=dtype)
        counts = buf[:c]
        _chunk_counts(n, seeds[j], counts)
        # counts are small integers (exact in float32); values lose precision only
        # beyond 7 significant digits, far below resampling noise.
        for g, (s, e) in enumerate(bounds):
            out[j * chunk : j * chunk + c, g, :] = counts[:, s:e] @ data32[s:e]

    workers = threads if threads is not None else min(4, os.cpu_count() or 1)
    if workers <= 1 or n_chunks == 1:
        for j in range(n_chunks):
            work(j)
    else:
        with _blas_threads(1), ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, range(n_chunks)))
    return out


def _sums_multinomial(
    design: np.ndarray, codes: np.ndarray, n_blocks: int, n_resamples: int, seed: int
) -> Optional[np.ndarray]:
    """Same as :func:`_sums_general` via distinct rows, or ``None`` if there are too many."""
    n, k = design.shape
    keyed = np.concatenate([codes[:, None].astype(np.float64), design], axis=1)
    # cheap pre-check: many distinct values in one column -> many distinct rows
    for col in range(keyed.shape[1]):
        if np.unique(keyed[: min(n, 20 * _DISTINCT_LIMIT), col]).size > _DISTINCT_LIMIT:
            return None
    uniq, freq = np.unique(keyed, axis=0, return_counts=True)
    if len(uniq) > _DISTINCT_LIMIT:
        return None
    rng = np.random.Generator(np.random.PCG64(_child_seeds(seed, 1)[0]))
    counts = rng.multinomial(n, freq / freq.sum(), size=n_resamples).astype(np.float64)
    out = np.empty((n_resamples, n_blocks, k), dtype=np.float64)
    for g in range(n_blocks):
        rows = uniq[:, 0] == g
        out[:, g, :] = counts[:, rows] @ uniq[rows, 1:]
    return out


#: most resampled means one call returns (1 GiB of float64), as the Rust kernel's ``MAX_VALUES``
MAX_VALUES = 1 << 27


def _check_size(n_resamples: int, n_groups: int, k: int) -> None:
    """An :class:`InputError` when ``n_resamples`` resamples of ``(n_groups + 1) x k`` means exceed
    :data:`MAX_VALUES`: 10**11 resamples was an abort in the Rust kernel (terabytes), 2**62 a panic."""
    if n_resamples * (n_groups + 1) * k > MAX_VALUES:
        from ragmeter.errors import InputError

        raise InputError(f"bootstrap: n_resamples = {n_resamples} is too many: {n_resamples} resamples x "
                         f"{(n_groups + 1) * k} means each is more than the {MAX_VALUES} numbers (1 GiB) the kernel "
                         "returns; use fewer resamples")


#: largest magnitude of a resampled value (the kernel sums residuals in float32), as the Rust kernel's ``MAX_VALUE``
MAX_VALUE = 1e30


def _check_values(data: np.ndarray) -> None:
    """An :class:`InputError` naming the first value that is infinite or beyond :data:`MAX_VALUE` (NaN is an
    unscored case): an infinity made every resample NaN or inf, 1e300 overflowed float32 the same way."""
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(data) & ~(np.abs(data) <= MAX_VALUE)
    if bad.any():
        from ragmeter.errors import InputError

        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"bootstrap: value {float(data[i, j])!r} (case {i}, column {j}) is beyond what the kernel "
                         "sums (finite, |x| <= 1e30)")


def bootstrap_means(
    values: ArrayLike,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    groups: Optional[ArrayLike] = None,
    threads: Optional[int] = None,
    engine: str = "auto",
) -> Dict[Any, np.ndarray]:
    """Resampled means of every column of ``values`` (``n x k``; NaN = unscored).

    Returns ``{None: (n_resamples x k)}`` for the whole set, plus one entry per
    group label (as ``str``) when ``groups`` (length ``n``) is given. Groups are
    computed from the same resamples of the whole set (a group's size varies
    between resamples, as it would between samples); a resample in which a
    group has no scored case gives NaN there.

    ``engine``: ``"auto"`` (Rust kernel for the general path when available),
    ``"rust"`` (required) or ``"numpy"`` (the reference implementation).
    ``threads``: worker threads (default: all CPUs for Rust, up to 4 for numpy);
    the result never depends on it.
    """
    from ragmeter._args import check_arg

    n_resamples = check_arg("n_resamples", n_resamples, "int", low=0)
    threads = check_arg("threads", threads, "int", low=1, high=MAX_THREADS, optional=True)
    data = to_float_array(values)
    if data.ndim == 1:
        data = data[:, None]
    n, k = data.shape
    _check_values(data)
    if groups is None:
        labels: List[str] = []
        codes = np.zeros(n, dtype=np.int64)
    else:
        garr = np.asarray(groups if isinstance(groups, np.ndarray) else list(groups), dtype=object).astype(str)
        if len(garr) != n:
            raise ValueError("groups must have one label per case")
        label_arr, codes = np.unique(garr, return_inverse=True)
        labels = [str(x) for x in label_arr]
        codes = codes.astype(np.int64)
    n_blocks = max(1, len(labels))
    _check_size(n_resamples, n_blocks, k)
    if n == 0:
        return {None: np.full((n_resamples, k), np.nan)}
    order = np.argsort(codes, kind="stable")
    data, codes = data[order], codes[order]
    scored = ~np.isnan(data)
    rust = _use_rust(engine, n)
    # design columns: value * scored for each column, then the distinct scored masks
    mask_cols, mask_of = [], []
    for j in range(k):
        for m, existing in enumerate(mask_cols):
            if np.array_equal(existing, scored[:, j]):
                mask_of.append(m)
                break
        else:
            mask_of.append(len(mask_cols))
            mask_cols.append(scored[:, j])
    masks = np.stack(mask_cols, axis=1).astype(np.float64)

    def design(centre: np.ndarray) -> np.ndarray:
        return np.concatenate([np.where(scored, data - centre, 0.0), masks], axis=1)

    centre = _exact_centres(data, scored)
    sums = None
    if n > _DISTINCT_LIMIT:
        sums = _sums_multinomial(design(centre), codes, n_blocks, n_resamples, seed)
    if sums is None and rust:
        out = _rust_kernel().bootstrap_means(
            np.ascontiguousarray(data), codes, n_blocks, n_resamples, seed % 2**64, threads
        )
        rust_result: Dict[Any, np.ndarray] = {None: out[:, 0, :]}
        for g, label in enumerate(labels):
            rust_result[label] = out[:, 1 + g, :]
        return rust_result
    if sums is None:
        edges = np.searchsorted(codes, np.arange(n_blocks + 1))
        bounds = [(int(edges[g]), int(edges[g + 1])) for g in range(n_blocks)]
        if _general_dtype(n, n_resamples) == np.float32:
            # float32 sums of residuals keep ~7 significant digits of the *spread*: centred on the column mean
            with np.errstate(invalid="ignore"):
                centre = np.array([np.nanmean(data[:, j]) if scored[:, j].any() else 0.0 for j in range(k)])
        sums = _sums_general(design(centre), bounds, n_resamples, seed, threads)

    def means(block: np.ndarray) -> np.ndarray:
        den = block[:, [k + m for m in mask_of]]
        num = block[:, :k] + centre * den
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)

    result: Dict[Any, np.ndarray] = {None: means(sums.sum(axis=1))}
    for g, label in enumerate(labels):
        result[label] = means(sums[:, g, :])
    return result


def percentile_interval(resampled: np.ndarray, confidence: float = 0.95) -> Tuple[Optional[float], Optional[float]]:
    """The percentile interval of resampled statistics (NaN resamples ignored)."""
    r = np.asarray(resampled, dtype=np.float64)
    r = r[~np.isnan(r)]
    if r.size == 0:
        return (None, None)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.percentile(r, [100 * alpha, 100 * (1 - alpha)])
    return (float(lo), float(hi))


def interval_defined(n: int, confidence: float = 0.95) -> bool:
    """Whether a percentile bootstrap interval of a mean over ``n`` cases can be the stated level: below 4 cases a
    resample repeating one case has probability ``n**(1 - n)`` >= 1/9 (> 2.5%), so the 95% bounds are always the
    smallest and largest value (one case: that case alone, an interval of zero width). Below that, no interval
    is given (None), never a degenerate one."""
    return n >= 1 and n ** (1.0 - n) < (1.0 - confidence) / 2.0


def rate_counting_failed(n_yes: int, n_judged: int, n_failed: int) -> Tuple[int, Optional[float]]:
    """A judge rate that counts a failed call as a "no": ``n_yes`` of the ``n_judged`` rows the judge scored, over
    those rows and the ``n_failed`` rows whose call failed. Returns (denominator, rate); the rate is None when
    there is no row, and when the judge scored none (every call failed: 0% would read as a measurement). The one
    rule of summary.json's ``correct_rate`` and a custom metric's ``pass_rate``, and of the reports' note beside
    their Correct (which is over the scored rows alone)."""
    denominator = n_judged + n_failed
    return denominator, (n_yes / denominator if n_judged else None)


def bootstrap_ci(
    values: ArrayLike,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Tuple[Optional[float], Optional[float]]:
    """Percentile bootstrap interval of the mean of the non-null ``values``.

    ``(None, None)`` when fewer are scored than give an interval at that level (:func:`interval_defined`).
    """
    data = to_float_array(values)
    data = data[~np.isnan(data)]
    if not interval_defined(data.size, confidence):
        return (None, None)
    means = bootstrap_means(data, n_resamples=n_resamples, seed=seed)[None][:, 0]
    return percentile_interval(means, confidence)


def paired_differences(baseline: ArrayLike, candidate: ArrayLike) -> np.ndarray:
    """``candidate - baseline`` per case; NaN where either side is unscored."""
    a = to_float_array(baseline)
    b = to_float_array(candidate)
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length: {a.shape[0]} vs {b.shape[0]}")
    return b - a


def paired_bootstrap_ci(
    baseline: ArrayLike,
    candidate: ArrayLike,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Tuple[Optional[float], Optional[float]]:
    """Paired percentile bootstrap interval of ``mean(candidate - baseline)``.

    Only cases scored in both runs take part.
    """
    return bootstrap_ci(paired_differences(baseline, candidate), n_resamples=n_resamples, seed=seed, confidence=confidence)


# --------------------------------------------------------------------------- McNemar


def holm_adjust(p_values: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm's step-down adjustment of a family of p-values (Holm, 1979), in their order; None stays None and
    does not count in the family's size. An adjusted p below alpha rejects with the family-wise error rate held
    at alpha, whatever the tests' dependence: the i-th smallest of m is multiplied by ``m - i`` (from 0), and
    kept at least as large as the one before it, at most 1."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    out: List[Optional[float]] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * float(p)))
        out[i] = running
    return out


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts.

    ``b`` = cases right in the baseline and wrong in the candidate, ``c`` = the
    reverse (or any two discordant counts; the test is symmetric). Under the
    null hypothesis each discordant pair is a fair coin, so the p-value is
    ``min(1, 2 * P[X <= min(b, c)])`` with ``X ~ Binomial(b + c, 1/2)``. With
    no discordant pair the p-value is 1.
    """
    if int(b) != b or int(c) != c:
        raise ValueError(f"discordant counts must be whole numbers, not {b!r} and {c!r}")
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    if n <= 1000:
        tail = sum(math.comb(n, i) for i in range(k + 1))
        return min(1.0, 2.0 * tail / 2**n)
    # log-space: log C(n, i) = sum_{j<=i} log((n - j + 1) / j)
    j = np.arange(1, k + 1, dtype=np.float64)
    logc = np.concatenate([[0.0], np.cumsum(np.log((n - j + 1) / j))])
    logp = logc - n * math.log(2.0)
    m = logp.max()
    tail_log = m + math.log(np.exp(logp - m).sum())
    return float(min(1.0, 2.0 * math.exp(tail_log)))


def mcnemar(baseline: ArrayLike, candidate: ArrayLike) -> Dict[str, Any]:
    """McNemar's exact test on paired booleans (nulls skipped).

    Returns ``n`` (pairs with both sides known), ``both``, ``neither``,
    ``regressions`` (true -> false), ``wins`` (false -> true) and ``p_value``.
    """
    a = to_float_array(baseline)
    b = to_float_array(candidate)
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok] > 0.5, b[ok] > 0.5
    regressions = int(np.sum(a & ~b))
    wins = int(np.sum(~a & b))
    return {
        "n": int(ok.sum()),
        "both": int(np.sum(a & b)),
        "neither": int(np.sum(~a & ~b)),
        "regressions": regressions,
        "wins": wins,
        "p_value": mcnemar_exact(regressions, wins),
    }


# --------------------------------------------------------------------------- detectable effects

#: z_{1 - alpha/2} + z_{power} for alpha = 0.05 (two-sided) and power = 0.8: 1.95996 + 0.84162
_Z_SUM = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)


def min_detectable_difference(n: int, sd_diff: float, *, alpha: float = 0.05, power: float = 0.8) -> Optional[float]:
    """Minimum detectable mean difference for a paired comparison of ``n`` cases.

    ``MDD = (z_{1-alpha/2} + z_{power}) * sd_diff / sqrt(n)``: the true mean
    difference that a two-sided test at level ``alpha`` detects with
    probability ``power``, where ``sd_diff`` is the standard deviation of the
    per-case differences (normal approximation). With alpha 0.05 and power 0.8
    the factor is 2.80. The result is never below ``1 / n`` (one case: the
    set's resolution). ``None`` when ``n == 0``.
    """
    if n <= 0:
        return None
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return max(z * float(sd_diff) / math.sqrt(n), 1.0 / n)


def min_detectable_difference_proportion(
    n: int, discordant_rate: Optional[float] = None, *, alpha: float = 0.05, power: float = 0.8
) -> Optional[float]:
    """Minimum detectable difference of a paired proportion (e.g. accuracy) at ``n`` cases.

    A per-case difference of two booleans is -1, 0 or +1, so its variance is at
    most the discordant rate ``p_d`` (share of cases that flip either way):
    ``MDD = (z_{1-alpha/2} + z_{power}) * sqrt(p_d / n)``. A true difference
    ``delta`` needs at least a share ``delta`` of the cases to flip, so the
    discordant rate is taken as ``max(p_d, delta)``; solved for ``delta`` that is
    ``MDD = max(z * sqrt(p_d / n), z**2 / n)`` with ``z = 2.80`` at alpha 0.05 and
    power 0.8. The floor ``z**2 / n`` (7.85 cases' worth) is what two runs that
    flip few or no cases can detect: McNemar's exact test needs at least 6
    discordant pairs, all one way, to reach p < 0.05, so 1 case (``1 / n``) is
    never detectable. It agrees within a few percent with the exact power of
    McNemar's exact test from 20 cases up. Above 1 (7 cases or fewer) no
    difference of two rates is detectable. Pass the observed discordant rate
    (in [0, 1]); when it is unknown the worst case ``p_d = 1`` is used
    (pessimistic: two similar systems typically flip 5-20% of cases).
    """
    if n <= 0:
        return None
    p_d = 1.0 if discordant_rate is None else float(discordant_rate)
    if not 0.0 <= p_d <= 1.0:  # NaN fails too
        raise ValueError(f"discordant_rate must be a share in [0, 1], not {discordant_rate!r}")
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return max(z * math.sqrt(p_d / n), z * z / n)


# --------------------------------------------------------------------------- aggregates


@dataclass(frozen=True)
class Aggregate:
    """A mean with its sample size and 95% bootstrap interval.

    ``value`` is the mean over scored cases (``None`` when none is scored);
    ``n_scored`` counts non-null cases and ``n_total`` every case, so a run
    where the judge failed on half the cases shows ``n_scored = n_total / 2``
    instead of a silently higher average.
    """

    value: Optional[float]
    n_scored: int
    n_total: int
    ci_low: Optional[float]
    ci_high: Optional[float]

    @classmethod
    def of(
        cls,
        values: ArrayLike,
        *,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: int = DEFAULT_SEED,
        confidence: float = 0.95,
    ) -> "Aggregate":
        data = to_float_array(values)
        scored = data[~np.isnan(data)]
        if scored.size == 0:
            return cls(None, 0, int(data.size), None, None)
        lo, hi = bootstrap_ci(scored, n_resamples=n_resamples, seed=seed, confidence=confidence)
        return cls(float(scored.mean()), int(scored.size), int(data.size), lo, hi)

    @classmethod
    def from_resamples(cls, values: ArrayLike, resampled: np.ndarray, confidence: float = 0.95,
                       n_total: Optional[int] = None) -> "Aggregate":
        """Build from precomputed resampled means (see :func:`bootstrap_means`). ``n_total``: the cases the metric
        applies to, when not every value's case (default: all of ``values``)."""
        data = to_float_array(values)
        scored = data[~np.isnan(data)]
        total = int(data.size) if n_total is None else int(n_total)
        if scored.size == 0:
            return cls(None, 0, total, None, None)
        lo, hi = percentile_interval(resampled, confidence) if interval_defined(scored.size, confidence) else (None, None)
        return cls(float(scored.mean()), int(scored.size), total, lo, hi)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def format(self, percent: bool = True, digits: int = 1) -> str:
        """``72.0% [65.1, 78.3] (n=100/120)`` or ``0.720 [...]``."""
        if self.value is None:
            return f"n/a (n=0/{self.n_total})"
        if percent:
            v = f"{100 * self.value:.{digits}f}%"
            ci = f" [{100 * self.ci_low:.{digits}f}, {100 * self.ci_high:.{digits}f}]" if self.ci_low is not None else ""
        else:
            v = f"{self.value:.3f}"
            ci = f" [{self.ci_low:.3f}, {self.ci_high:.3f}]" if self.ci_low is not None else ""
        return f"{v}{ci} (n={self.n_scored}/{self.n_total})"


def aggregate(values: ArrayLike, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> Aggregate:
    """Shorthand for :meth:`Aggregate.of`."""
    return Aggregate.of(values, n_resamples=n_resamples, seed=seed)
