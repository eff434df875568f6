#!/usr/bin/env python3
"""Real-server check of the vLLM plugin (see serving_check.py): `vllm
serve` of a tiny local Llama with --enforce-eager, the tensormorph plugin
selected with VLLM_PLUGINS, tmdb attached to rank 0, one completion request
stopped at a breakpoint.  Exit 77 where vLLM, a GPU or tmdb is missing."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_check as sc  # noqa: E402


def main() -> None:
    sc.require("vllm")
    where = sc.workdir()
    model = sc.tiny_model(where)
    sockdir = where / "socks"
    sockdir.mkdir(mode=0o700)
    trace = where / "serve.tmrun"
    port = sc.free_port()
    env = sc.plugin_env(where, VLLM_PLUGINS="tensormorph", TENSORMORPH_LISTEN=str(sockdir),
                        TENSORMORPH_SERVING_PAUSE="120", TENSORMORPH_RECORD=str(trace),
                        TENSORMORPH_SERVING_STRICT="1")
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--port", str(port), "--host", "127.0.0.1", "--enforce-eager", "--dtype", "float16",
            "--max-model-len", "128", "--gpu-memory-utilization", "0.2",
            "--served-model-name", "tiny"]
    srv = sc.Server("vllm", argv, env, where / "server.log")
    try:
        base = f"http://127.0.0.1:{port}"
        sock = sc.wait_ready(srv.proc, base + "/health", sockdir)
        # X-Request-Id names the request (the engine adds a suffix to it)
        out = sc.debug_one_request(sock, lambda: sc.post(
            base + "/v1/completions", {"model": "tiny", "prompt": "w1 w2 w3", "max_tokens": 4},
            headers={"X-Request-Id": "tmdb-check-1"}), "tmdb-check-1")
        if "Recorded by: vllm probe" not in out:
            sc.fail("`info probe` does not name the vllm probe")
        # the server runs on after detach
        ans = sc.post(base + "/v1/completions",
                      {"model": "tiny", "prompt": "w4 w5", "max_tokens": 2})
        if not ans.get("choices"):
            sc.fail(f"no answer after detach: {ans}")
    except SystemExit:
        print((where / "server.log").read_text()[-4000:])
        raise
    finally:
        srv.stop()
    sc.check_trace(trace, "vllm", r"cmpl-|^\w")
    sc.cleanup(where)
    print("PASS: vllm", flush=True)


if __name__ == "__main__":
    main()
