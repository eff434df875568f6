#!/usr/bin/env python3
"""Real-server check of the vLLM plugin (see serving_check.py): `vllm
serve` of a tiny local Llama with --enforce-eager, the tensormorph plugin
selected with VLLM_PLUGINS, tmdb attached to rank 0, one completion request
stopped at a breakpoint on its id.  vLLM's default model runner (V2) is
used; VLLM_USE_V2_MODEL_RUNNER=0 in the environment checks the V1 one
(vLLM 0.33 and older: 0.34 has no V1 runner and refuses the 0).  Exit 77
where vLLM, a GPU or tmdb is missing."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_check as sc  # noqa: E402


def argv(model: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--port", str(port), "--host", "127.0.0.1", "--enforce-eager", "--dtype", "float16",
            "--max-model-len", "128", "--gpu-memory-utilization", "0.2",
            "--served-model-name", "tiny"]


def ask(base: str, prompt: str, max_tokens: int, rid: str | None) -> dict:
    # X-Request-Id names the request (the engine adds a suffix to it)
    return sc.post(base + "/v1/completions",
                   {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens},
                   headers={"X-Request-Id": rid} if rid else None)


if __name__ == "__main__":
    sc.run("vllm", "VLLM_PLUGINS", argv, ask, lambda ans: bool(ans.get("choices")),
           r"cmpl-|^\w")
