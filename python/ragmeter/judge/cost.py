"""Judge cost: a price table per model, in USD per million tokens.

The defaults are list prices at the time of writing and will drift: pass your
own with ``--prices FILE`` (JSON ``{"model": {"input": 0.15, "output": 0.6}}``
or ``{"model": [0.15, 0.6]}``) or ``--price IN,OUT`` for the judge model. A
model is matched exactly, then by the longest known prefix (``gpt-4o-mini-2024-07-18``
uses ``gpt-4o-mini``). Unknown models have no price: their cost is reported as
null, never as 0, and ``--budget`` refuses to start.

This is the judge's own cost; the system's cost read from the run file is
reported beside it, never mixed in.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional, Union

__all__ = ["Price", "PriceTable", "DEFAULT_PRICES", "estimate_tokens"]


@dataclass(frozen=True)
class Price:
    input: float   #: USD per million prompt tokens
    output: float  #: USD per million completion tokens

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


DEFAULT_PRICES: Dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "o3-mini": Price(1.10, 4.40),
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
    "deepseek-chat": Price(0.27, 1.10),
    "deepseek-reasoner": Price(0.55, 2.19),
    "qwen-plus": Price(0.40, 1.20),
    "qwen-turbo": Price(0.05, 0.20),
    "qwen-max": Price(1.60, 6.40),
}


def _price(value: object, where: str) -> Price:
    if isinstance(value, Price):
        return value
    pair: tuple = ()
    if isinstance(value, Mapping) and "input" in value and "output" in value:
        pair = (value["input"], value["output"])
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        pair = tuple(value)
    if not pair:
        raise ValueError(f"{where}: expected {{\"input\": X, \"output\": Y}} or [X, Y] (USD per million tokens)")
    try:
        price = Price(float(pair[0]), float(pair[1]))
    except (TypeError, ValueError):
        price = Price(math.nan, math.nan)
    # a negative or NaN price would make every cost (and --budget's arithmetic) meaningless, silently
    if not all(math.isfinite(v) and v >= 0 for v in (price.input, price.output)):
        raise ValueError(f"{where}: each price must be a number >= 0 (USD per million tokens), got "
                         f"{pair[0]!r}, {pair[1]!r}")
    return price


class PriceTable:
    def __init__(self, prices: Optional[Mapping[str, object]] = None, *, defaults: bool = True) -> None:
        self.prices: Dict[str, Price] = dict(DEFAULT_PRICES) if defaults else {}
        for model, value in (prices or {}).items():
            self.prices[model] = _price(value, f"price of {model!r}")

    @classmethod
    def from_file(cls, path: Union[str, Path]) -> "PriceTable":
        from ragmeter.errors import input_error

        try:
            data = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # past a byte-order mark (Notepad's)
        except OSError as exc:
            raise input_error(path, None, f"cannot read price table: {exc.strerror}") from None
        except ValueError as exc:
            raise input_error(path, getattr(exc, "lineno", None), f"invalid JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise input_error(path, None, "expected a JSON object mapping model names to prices")
        try:
            return cls(data)
        except ValueError as exc:
            raise input_error(path, None, str(exc)) from None

    def lookup(self, model: str) -> Optional[Price]:
        if model in self.prices:
            return self.prices[model]
        base = model.rsplit("/", 1)[-1]  # "openai/gpt-4o-mini" (LiteLLM, OpenRouter)
        if base in self.prices:
            return self.prices[base]
        best = None
        for name in self.prices:
            if base.startswith(name) and (best is None or len(name) > len(best)):
                best = name
        return self.prices[best] if best else None

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> Optional[float]:
        price = self.lookup(model)
        return None if price is None else price.cost(prompt_tokens, completion_tokens)


_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def estimate_tokens(text: str) -> int:
    """A rough token count without a tokenizer: one per CJK character, one per 4 other characters."""
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4
