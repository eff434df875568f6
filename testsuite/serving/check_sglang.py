#!/usr/bin/env python3
"""Real-server check of the SGLang plugin (see serving_check.py and
README): `sglang.launch_server` of a tiny local Llama with every CUDA
graph phase off, the tensormorph plugin selected with SGLANG_PLUGINS, tmdb
attached to TP rank 0, one /generate request stopped at a breakpoint on
its id.  Exit 77 where SGLang, a GPU or tmdb is missing."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_check as sc  # noqa: E402


def eager_flags() -> list[str]:
    """Every CUDA graph phase off.  SGLang 0.5.2x (sglang.srt.runtime_context
    exists): --cuda-graph-config JSON, which wins over every other flag;
    0.5.11: --disable-cuda-graph leaves the prefill's piecewise graphs on,
    so --disable-piecewise-cuda-graph too."""
    if importlib.util.find_spec("sglang.srt.runtime_context") is not None:
        return ["--cuda-graph-config", json.dumps({"decode": {"backend": "disabled"},
                                                   "prefill": {"backend": "disabled"}})]
    return ["--disable-cuda-graph", "--disable-piecewise-cuda-graph"]


def argv(model: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model),
            "--port", str(port), "--host", "127.0.0.1", *eager_flags(),
            "--dtype", "float16", "--context-length", "128", "--mem-fraction-static", "0.2"]


def ask(base: str, prompt: str, max_tokens: int, rid: str | None) -> dict:
    # GenerateReqInput.rid names the request
    body = {"text": prompt, "sampling_params": {"max_new_tokens": max_tokens}}
    return sc.post(base + "/generate", {**body, "rid": rid} if rid else body)


if __name__ == "__main__":
    # ForwardBatch.rids may be unset in some SGLang versions: any id at all
    sc.run("sglang", "SGLANG_PLUGINS", argv, ask, lambda ans: "text" in ans, r".")
