"""Targets for a golden set and the gap to them (``--target N``, ``--targets SPEC``).

A spec names, per dimension, how many cases each value should have::

    category=term:50,semantic:30,multi:15;source=deepseek:40,zhipu:40,bailian:40

or the same as a TOML or JSON file (``{"category": {"term": 50, ...}, "source": {...}}``).
``--target N`` alone asks for even shares of ``N`` over the values seen.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from ragmeter._front import arg
from ragmeter.errors import InputError

Counts = Dict[str, int]
Spec = Dict[str, Counts]

_ITEM = re.compile(r"^\s*([^:=,;]+?)\s*:\s*(\d+)\s*$")


#: no golden set comes near it; larger numbers are typing slips (and overflow the tables' 64-bit counts)
MAX_TARGET = 10_000_000


def parse_targets(spec: str, dimensions: Sequence[str]) -> Spec:
    """Parse ``--targets`` (inline or a .toml/.json file) into ``{dimension: {value: n}}``.

    ``dimensions`` are the accepted section names (``category`` and the second
    dimension, ``source`` or the ``--by`` field). Raises :class:`InputError`.
    """
    path = Path(spec)
    if path.suffix.lower() in (".toml", ".json") or path.is_file():
        return _check_sections(_read_spec_file(path), dimensions, str(path))
    sections: Spec = {}
    for part in filter(str.strip, spec.split(";")):
        name, sep, body = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError(f"{arg('targets')}: {part.strip()!r} is not DIMENSION=VALUE:N,... (e.g. category=term:50,multi:15)")
        if name in sections:
            raise InputError(f"{arg('targets')}: section {name!r} is given twice (name each of its values once, in one section)")
        items: Counts = {}
        for item in filter(str.strip, body.split(",")):
            m = _ITEM.match(item)
            if m is None:
                raise InputError(f"{arg('targets')}: {item.strip()!r} in section {name!r} is not VALUE:N with N a whole number"
                                 " (a name holding , ; : or = goes in a .toml or .json file)")
            if m.group(1) in items:
                raise InputError(f"{arg('targets')}: {m.group(1)!r} is given twice in section {name!r}")
            items[m.group(1)] = int(m.group(2))
        sections[name] = items
    if not sections:
        raise InputError(f"{arg('targets')}: empty spec (e.g. category=term:50,multi:15;source=a:40,b:40)")
    return _check_sections(sections, dimensions, arg("targets"))


def _read_spec_file(path: Path) -> Dict[str, object]:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Notepad's) is not part of the text
    except OSError as exc:
        raise InputError(f"{path}: cannot read the targets file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary file, or text saved in a legacy encoding: no traceback
        line = exc.object[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); a targets file is "
                         f"TOML or JSON saved as UTF-8") from None
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            repeated: List[tuple] = []  # json.loads keeps the last of a repeated key, silently

            def unique(pairs: List[tuple]) -> Dict[str, object]:
                obj: Dict[str, object] = {}
                for key, value in pairs:
                    if key in obj:
                        repeated.append((key, obj))
                    obj[key] = value
                return obj

            data = json.loads(text, object_pairs_hook=unique)
            for key, obj in repeated:
                if obj is data:
                    raise InputError(f"{path}: section {key!r} is given twice")
                section = next((name for name, value in data.items() if value is obj), None)
                if section is not None:
                    raise InputError(f"{path}: {key!r} is given twice in section {section!r}")
    except InputError:
        raise
    except ValueError as exc:  # tomllib.TOMLDecodeError and json.JSONDecodeError are ValueErrors
        raise InputError(f"{path}: targets file does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected an object of sections such as {{\"category\": {{\"term\": 50}}}}")
    return data


def _check_sections(data: Mapping[str, object], dimensions: Sequence[str], where: str) -> Spec:
    out: Spec = {}
    for name, items in data.items():
        if name not in dimensions:
            raise InputError(f"{where}: unknown section {name!r} (expected {' or '.join(repr(d) for d in dimensions)})")
        if not isinstance(items, dict) or not items:
            raise InputError(f"{where}: section {name!r} must map values to case counts")
        section: Counts = {}
        for key, value in items.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"{where}: {name}.{key} must be a whole number of cases, got {value!r}")
            if value > MAX_TARGET:
                raise InputError(f"{where}: {name}.{key} must be at most {MAX_TARGET:,} cases, got {value:,}")
            section[str(key)] = value
        out[name] = section
    return out


def check_known(spec: Spec, seen: Dict[str, Counts], where: Optional[str] = None) -> None:
    """A section naming none of the values seen is a typo, not a plan: refuse it. ``where`` names the spec
    (default: the ``targets`` option as the front spells it)."""
    where = where or arg("targets")
    for name, section in spec.items():
        known = seen.get(name, {})
        if known and not any(key in known for key in section):
            raise InputError(
                f"{where}: section {name!r} names no {name} of the golden set "
                f"(it has {', '.join(list(known)[:8])}{', ...' if len(known) > 8 else ''})"
            )


def even_targets(counts: Counts, total: int) -> Counts:
    """``total`` split evenly over the values of ``counts``; the remainder goes to the smallest first."""
    if not counts:
        return {}
    base, extra = divmod(total, len(counts))
    smallest_first = sorted(counts, key=lambda key: counts[key])  # stable: ties keep their order
    bonus = set(smallest_first[:extra])
    return {key: base + (1 if key in bonus else 0) for key in counts}


def targets_for(counts: Counts, section: Optional[Counts], total: Optional[int]) -> Optional[Counts]:
    """Per-value targets: the spec's section (values it omits keep their count), else even shares."""
    if section is not None:
        out = {key: counts[key] for key in counts}
        out.update(section)
        return out
    if total is None:
        return None
    return even_targets(counts, total)


def gap(counts: Counts, targets: Optional[Counts]) -> Counts:
    """Cases still needed per value (never negative)."""
    if targets is None:
        return {}
    return {key: max(0, want - counts.get(key, 0)) for key, want in targets.items()}


def total_target(spec: Spec, explicit: Optional[int], dims: List[str]) -> Optional[int]:
    """The target size: ``--target``, else the largest section sum of the spec."""
    if explicit is not None:
        return explicit
    sums = [sum(spec[d].values()) for d in dims if d in spec]
    return max(sums) if sums else None
