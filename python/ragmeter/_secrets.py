"""Masking secrets (API keys, header tokens) in what a server sends back, before anything is stored or shown.

A server may echo a credential: a proxy quoting the request, a debug field, an error page. Replies are
masked *after* they are decoded, in their strings only: JSON may escape a key's characters (``\\/``,
``\\u...``) so that the raw text would not hold it, and masking the raw text would garble the reply's own
structure when a key is short (the key ``k`` turned ``"prompt_tokens"`` into ``"prompt_to***ens"``).

A secret of :data:`MIN_SECRET_CHARS` characters or more is masked wherever it occurs. A shorter one (a local
server started with ``--api-key k``) is masked only where it stands as a word of its own (``Bearer k``,
``'k'``), never inside other words, which it would turn to nonsense.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Optional, Tuple

__all__ = ["MIN_SECRET_CHARS", "Masker", "mask_decoded"]

#: secrets this long are masked anywhere; shorter ones only as a word of their own
MIN_SECRET_CHARS = 8
MASK = "***"


class Masker:
    """Masks a fixed set of secrets in texts (see the module's docstring for short ones)."""

    def __init__(self, secrets: Iterable[Optional[str]], *, short_as_words: bool = True) -> None:
        given = {s for s in secrets if s}
        self.anywhere = sorted((s for s in given if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True)
        short = sorted((s for s in given if len(s) < MIN_SECRET_CHARS), key=len, reverse=True)
        self._words = (re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, short)) + r")(?![\w-])")
                       if short and short_as_words else None)

    def __bool__(self) -> bool:
        return bool(self.anywhere) or self._words is not None

    def text(self, text: str) -> str:
        for secret in self.anywhere:
            if secret in text:
                text = text.replace(secret, MASK)
        if self._words is not None:
            text = self._words.sub(MASK, text)
        return text


def mask_decoded(value: Any, mask: Callable[[str], str]) -> Tuple[Any, bool]:
    """A decoded JSON value with ``mask`` applied to every string in it (object keys too), and whether any
    string changed."""
    found = False

    def walk(item: Any) -> Any:
        nonlocal found
        if isinstance(item, str):
            masked = mask(item)
            found = found or masked != item
            return masked
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value), found
