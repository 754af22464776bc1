"""What a chat reply says: its answer, apart from the reasoning around it. One place for the client (is there an
answer at all?) and the parser (where is the verdict?).

A reasoning model's thoughts come in ``reasoning_content`` (llama.cpp, DeepSeek, vLLM's reasoning parser) or
``reasoning`` (Ollama, OpenRouter), or in the content itself, as many local servers serve DeepSeek-R1 and QwQ:
a leading ``<think>...</think>`` block; thoughts ending in ``</think>`` whose opening tag the chat template put
in the prompt; or an opening tag never closed (the model stopped thinking mid-way). Thoughts are counted and
reported, never read as the verdict.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Tuple

__all__ = ["reply_text", "split_thoughts"]

#: thoughts ahead of the reply, in the content itself
_THOUGHTS = re.compile(r"^\s*<(think|thinking|reasoning)>.*?</\1\s*>", re.S | re.I)
#: the end of thoughts whose opening tag was in the prompt (DeepSeek-R1's and QwQ's chat templates end it with
#: "<think>\n"; a server without a reasoning parser returns the thoughts and the closing tag only)
_THOUGHTS_END = re.compile(r"</(?:think|thinking|reasoning)\s*>", re.I)
_THOUGHTS_OPEN = re.compile(r"^<(?:think|thinking|reasoning)>", re.I)


def reply_text(message: Dict[str, Any]) -> Tuple[str, str]:
    """(content, reasoning) of a chat reply's ``message``: ``content`` is a string, or a list of parts whose
    ``text`` is joined (null: none); the reasoning is ``reasoning_content`` or ``reasoning``."""
    content = message.get("content") or ""
    if not isinstance(content, str):  # some servers send a list of parts
        content = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    return content, reasoning if isinstance(reasoning, str) else str(reasoning)


def split_thoughts(content: str) -> Tuple[str, str]:
    """(thoughts, answer) of a reply's content, both stripped; the answer is empty when the content is all
    thoughts. A verdict that starts the content (``{...}``) is read whole, a ``</think>`` quoted in it too."""
    text = (content or "").strip()
    thoughts = ""
    block = _THOUGHTS.match(text)
    if block is not None:
        thoughts, text = block.group(0).strip(), text[block.end():].strip()
    elif _THOUGHTS_OPEN.match(text) and _THOUGHTS_END.search(text) is None:
        return text, ""  # opened and never closed: thinking to the end
    if not text.startswith("{"):
        end = _THOUGHTS_END.search(text)
        if end is not None:  # the thoughts end here: what follows them, if anything, is the answer
            thoughts, text = (thoughts + "\n" + text[:end.end()]).strip(), text[end.end():].strip()
    return thoughts, text
