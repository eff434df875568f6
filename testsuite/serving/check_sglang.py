#!/usr/bin/env python3
"""Real-server check of the SGLang plugin (see serving_check.py): SGLang's
launch_server on a tiny local Llama with CUDA graphs and torch.compile
off, the tensormorph plugin selected with SGLANG_PLUGINS, tmdb attached to
TP rank 0, one /generate request stopped at a breakpoint.  Exit 77 where
SGLang, a GPU or tmdb is missing."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_check as sc  # noqa: E402


def main() -> None:
    sc.require("sglang")
    where = sc.workdir()
    model = sc.tiny_model(where)
    sockdir = where / "socks"
    sockdir.mkdir(mode=0o700)
    trace = where / "serve.tmrun"
    port = sc.free_port()
    env = sc.plugin_env(where, SGLANG_PLUGINS="tensormorph", TENSORMORPH_LISTEN=str(sockdir),
                        TENSORMORPH_SERVING_PAUSE="120", TENSORMORPH_RECORD=str(trace),
                        TENSORMORPH_SERVING_STRICT="1")
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model),
            "--port", str(port), "--host", "127.0.0.1", "--disable-cuda-graph",
            "--dtype", "float16", "--context-length", "128", "--mem-fraction-static", "0.2"]
    srv = sc.Server("sglang", argv, env, where / "server.log")
    try:
        base = f"http://127.0.0.1:{port}"
        sock = sc.wait_ready(srv.proc, base + "/health", sockdir)
        # GenerateReqInput.rid names the request
        out = sc.debug_one_request(sock, lambda: sc.post(
            base + "/generate", {"text": "w1 w2 w3", "rid": "tmdb-check-1",
                                 "sampling_params": {"max_new_tokens": 4}}), "tmdb-check-1")
        if "Recorded by: sglang probe" not in out:
            sc.fail("`info probe` does not name the sglang probe")
        ans = sc.post(base + "/generate",
                      {"text": "w4 w5", "sampling_params": {"max_new_tokens": 2}})
        if "text" not in ans:
            sc.fail(f"no answer after detach: {ans}")
    except SystemExit:
        print((where / "server.log").read_text()[-4000:])
        raise
    finally:
        srv.stop()
    # ForwardBatch.rids may be unset in some SGLang versions: any id at all
    sc.check_trace(trace, "sglang", r".")
    sc.cleanup(where)
    print("PASS: sglang", flush=True)


if __name__ == "__main__":
    main()
