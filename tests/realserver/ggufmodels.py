"""Tiny llama-architecture GGUF models written at test time with ``gguf`` (llama.cpp's own writer).

Nothing is downloaded and nothing large is committed: each model is a few hundred KB, the same bytes on
every run.

*Scripted* model (:func:`write_scripted`): attention and feed-forward weights are zero, so the residual
stream is the token embedding and the network is a bigram table: the next token depends only on the
current one (one-hot embeddings, ``output.weight[next, current]`` = 1). The chat template ends the prompt
with a marker token chosen from the conversation (the ``Task:`` line of the system prompt, or a trigger
word in the user message); the marker's successor is the first of the tokens that spell a reply, in
pieces of at most 32 bytes (llama-cpp-python decodes a token into a 32-byte buffer), the last piece's
successor is end-of-sequence. Greedy decoding therefore answers each judge task with a fixed, known
reply through the real server: its tokeniser, chat template, JSON grammar, ``usage`` and
``finish_reason``. Trigger words script the failure paths: ``@@LOOP@@`` starts a JSON string that never
ends (truncated at every budget), ``@@SCHEMA@@`` a JSON object of the wrong shape (the repair turn gets it
again), ``@@PROSE@@`` a sentence that is not JSON. Prompt text is byte tokens, which all share embedding
column 0. Served for embeddings, the model has no pooling: one vector per token.

*Embedding* model (:func:`write_embedder`): the same tokeniser and Gaussian token embeddings from a fixed
seed, every other weight zero, ``pooling_type`` MEAN in its GGUF. The llama.cpp in llama-cpp-python
0.3.16 reads that key only for some architectures (BERT-like ones, qwen2, qwen3, ...), not for
``llama``, so this is a ``qwen2`` network (llama's layout plus zero q/k/v biases). With attention and
feed-forward contributing nothing, the vector of a text is the mean over its tokens of the
RMS-normalised token embeddings (:func:`mean_pooled`), which the tests compute from the weights in the
file.

*Random* model (:func:`write_random`): the same tokeniser, Gaussian weights from a fixed seed; what it
says is arbitrary, which is the point of the failure-path tests.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Tuple

import numpy as np

if TYPE_CHECKING:
    import gguf

N_EMBD = 64
N_HEAD = 4
N_FF = 64
N_CTX_TRAIN = 8192
EPS = 1e-5  #: RMS norm epsilon

#: task (as in the prompt's "Task: NAME" line) -> the judge's reply
REPLIES: Dict[str, dict] = {
    "correctness": {"reason": "r", "score": 4, "correct": True},
    "faithfulness-statements": {"statements": ["s1", "s2"]},
    "faithfulness-verdicts": {"verdicts": [{"index": 0, "reason": "r", "verdict": 1},
                                           {"index": 1, "reason": "r", "verdict": 0}]},
    "answer-relevancy-questions": {"questions": [{"question": "q?", "noncommittal": False}]},
    "answer-relevancy-graded": {"grades": [{"index": 0, "grade": "partial"}]},
    "context-precision": {"verdicts": [{"index": 0, "reason": "r", "verdict": 0},
                                       {"index": 1, "reason": "r", "verdict": 1}]},
    "context-recall": {"statements": [{"statement": "a", "reason": "r", "attributed": 1},
                                      {"statement": "b", "reason": "r", "attributed": 1},
                                      {"statement": "c", "reason": "r", "attributed": 0}]},
}
#: the scores these replies give on a case with two retrieved chunks (see REPLIES)
EXPECTED = {"correctness": 4.0, "faithfulness": 0.5, "answer_relevancy_graded": 0.5, "context_precision": 0.5,
            "context_recall": 2 / 3}
#: trigger word in the user message -> (reply text, successor of the reply token: "eos" or "self")
FAILURES: Dict[str, Tuple[str, str]] = {
    "@@LOOP@@": ('{"reason": "', "loop"),
    "@@SCHEMA@@": ('{"verdict": "maybe"}', "eos"),
    "@@PROSE@@": ("I would say it is fine.", "eos"),
}
LOOP_TEXT = "la "
#: longest token text llama-cpp-python detokenises (its buffer per token)
MAX_PIECE = 32


def _pieces(text: str, taken: set) -> List[str]:
    """``text`` cut into pieces of at most MAX_PIECE bytes, none already in ``taken`` (token texts are unique)."""
    for size in range(MAX_PIECE, 3, -1):
        pieces = [text[i:i + size] for i in range(0, len(text), size)]
        if not taken.intersection(pieces) and len(set(pieces)) == len(pieces):
            taken.update(pieces)
            return pieces
    raise ValueError(f"cannot cut {text!r} into unique pieces")


def _vocab() -> Tuple[List[str], List[int]]:
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    return tokens, [int(t) for t in types]


def _marker(name: str) -> str:
    return f"<|{name}|>"


def _template(markers: Dict[str, str]) -> str:
    """Role-tagged turns, then the marker of the task (a trigger word in the user message wins)."""
    parts = ["{%- for m in messages -%}{{ m['role'] }}: {{ m['content'] }}\n{% endfor -%}",
             "{%- set task = messages[0]['content'] -%}",
             "{%- set user = messages[1]['content'] if messages | length > 1 else '' -%}"]
    branches = [f"'{word}' in user" for word in FAILURES] + [f"task.startswith('Task: {t} (')" for t in REPLIES]
    names = list(FAILURES) + list(REPLIES)
    for i, (cond, name) in enumerate(zip(branches, names)):
        parts.append(("{%- if " if i == 0 else "{%- elif ") + cond + " -%}" + markers[name])
    parts.append("{%- else -%}" + markers["other"] + "{%- endif -%}")
    return "".join(parts)


def _writer(path: Path, tokens: List[str], types: List[int], template: str,
            arch: str = "llama") -> "gguf.GGUFWriter":
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("ragmeter-test")
    w.add_context_length(N_CTX_TRAIN)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(1)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_chat_template(template)
    return w


def _tensors(w: "gguf.GGUFWriter", embd: np.ndarray, output: np.ndarray, layer: Dict[str, np.ndarray]) -> None:
    w.add_tensor("token_embd.weight", embd.astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor("output.weight", output.astype(np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for name, shape in (("attn_q", (N_EMBD, N_EMBD)), ("attn_k", (N_EMBD, N_EMBD)), ("attn_v", (N_EMBD, N_EMBD)),
                        ("attn_output", (N_EMBD, N_EMBD)), ("ffn_gate", (N_FF, N_EMBD)), ("ffn_up", (N_FF, N_EMBD)),
                        ("ffn_down", (N_EMBD, N_FF))):
        w.add_tensor(f"blk.0.{name}.weight", layer.get(name, np.zeros(shape)).astype(np.float32))


def _finish(w: "gguf.GGUFWriter") -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_scripted(path: Path) -> Path:
    """The bigram model whose greedy replies are :data:`REPLIES` (see the module doc)."""
    import gguf

    tokens, types = _vocab()
    eos = 2
    successor: Dict[int, int] = {}  # token id -> the token greedy decoding emits after it
    markers = {}
    taken = {LOOP_TEXT}

    def add(text: str) -> int:
        tokens.append(text)
        types.append(int(gguf.TokenType.USER_DEFINED))
        return len(tokens) - 1

    for name in ["other", *FAILURES, *REPLIES]:
        markers[name] = _marker(name)
        marker_id = add(markers[name])
        if name == "other":
            successor[marker_id] = eos
            continue
        text, after = FAILURES[name] if name in FAILURES else (json.dumps(REPLIES[name], separators=(",", ":")), "eos")
        previous = marker_id
        for piece in _pieces(text, taken):
            successor[previous] = add(piece)
            previous = successor[previous]
        reply_id = previous  # the last piece
        if after == "loop":
            loop_id = add(LOOP_TEXT)
            successor[reply_id] = loop_id
            successor[loop_id] = loop_id
        else:
            successor[reply_id] = eos
    if len(successor) + 1 > N_EMBD:
        raise ValueError("more scripted tokens than embedding columns")
    n_vocab = len(tokens)
    embd = np.zeros((n_vocab, N_EMBD))
    output = np.zeros((n_vocab, N_EMBD))
    output[eos, 0] = 1.0  # column 0: every unscripted token (prompt text) is followed by end-of-sequence
    embd[:, 0] = 1.0
    for column, (tok, nxt) in enumerate(sorted(successor.items()), start=1):
        embd[tok, 0] = 0.0
        embd[tok, column] = 1.0
        output[nxt, column] = 1.0
    w = _writer(path, tokens, types, _template(markers))
    _tensors(w, embd, output, {})
    _finish(w)
    return path


EMBEDDER_SEED = 1818


def write_embedder(path: Path) -> Path:
    """A mean-pooling embedding model (see the module doc); qwen2 because llama ignores ``pooling_type``."""
    import gguf

    tokens, types = _vocab()
    rng = np.random.default_rng(EMBEDDER_SEED)
    w = _writer(path, tokens, types, "{{ messages[0]['content'] }}", arch="qwen2")
    w.add_pooling_type(gguf.PoolingType.MEAN)
    _tensors(w, rng.standard_normal((len(tokens), N_EMBD)), np.zeros((len(tokens), N_EMBD)), {})
    for name in ("attn_q", "attn_k", "attn_v"):
        w.add_tensor(f"blk.0.{name}.bias", np.zeros(N_EMBD, dtype=np.float32))
    _finish(w)
    return path


def mean_pooled(path: Path, token_ids: List[int]) -> np.ndarray:
    """The vector :func:`write_embedder`'s model gives these tokens, from the weights stored in ``path``."""
    import gguf

    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    embd = np.asarray(tensors["token_embd.weight"].data, dtype=np.float64)
    norm = np.asarray(tensors["output_norm.weight"].data, dtype=np.float64)
    x = embd[token_ids]
    x = x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + EPS)
    return (x * norm).mean(axis=0)


def write_random(path: Path, seed: int = 18) -> Path:
    """Gaussian weights from ``seed``; the same tokeniser and a plain chat template."""
    tokens, types = _vocab()
    rng = np.random.default_rng(seed)
    n_vocab = len(tokens)

    def gauss(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape) / np.sqrt(shape[-1])

    layer = {name: gauss(*shape) for name, shape in (
        ("attn_q", (N_EMBD, N_EMBD)), ("attn_k", (N_EMBD, N_EMBD)), ("attn_v", (N_EMBD, N_EMBD)),
        ("attn_output", (N_EMBD, N_EMBD)), ("ffn_gate", (N_FF, N_EMBD)), ("ffn_up", (N_FF, N_EMBD)),
        ("ffn_down", (N_EMBD, N_FF)))}
    template = "{%- for m in messages -%}{{ m['role'] }}: {{ m['content'] }}\n{% endfor -%}assistant:"
    w = _writer(path, tokens, types, template)
    _tensors(w, gauss(n_vocab, N_EMBD) * 4.0, gauss(n_vocab, N_EMBD) * 4.0, layer)
    _finish(w)
    return path
