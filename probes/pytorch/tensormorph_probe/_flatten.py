"""Flattening module inputs and outputs into numbered tensor slots.

A module may return a tensor, a tuple/list, a dict, a dataclass or a
transformers ModelOutput (an OrderedDict dataclass).  Slots `out.0..N` are
the tensors found depth-first in a fixed order: sequence order, dict
insertion order (ModelOutput: its set fields), dataclass field order.
Non-tensor leaves (None, ints, cache objects) are skipped.  The same order is
used for inputs: positional arguments, then keyword arguments as passed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

MAX_DEPTH = 8
FLATTEN_RULE = ("depth-first: sequence order, dict insertion order, dataclass field order; "
                "non-tensor leaves skipped; inputs: args then kwargs")


def _walk(obj: Any, out: list[torch.Tensor], limit: int, depth: int) -> None:
    if len(out) >= limit or depth > MAX_DEPTH:
        return
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _walk(x, out, limit, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            _walk(x, out, limit, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _walk(getattr(obj, f.name, None), out, limit, depth + 1)


def flatten(obj: Any, limit: int) -> list[torch.Tensor]:
    """The tensors of obj in slot order, at most limit of them."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    out: list[torch.Tensor] = []
    _walk(obj, out, limit, 0)
    return out


def flatten_call(args: tuple[Any, ...], kwargs: dict[str, Any] | None,
                 limit: int) -> list[torch.Tensor]:
    """Tensors of a call's inputs: positional, then keyword arguments."""
    out: list[torch.Tensor] = []
    _walk(args, out, limit, 0)
    if kwargs:
        _walk(kwargs, out, limit, 0)
    return out
