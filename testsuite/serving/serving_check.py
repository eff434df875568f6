"""Checks of the serving plugins against REAL servers (doc/serving.md):
starts `vllm serve` / SGLang's launch_server on a tiny local Llama (random
weights written here, a word-level tokenizer built here: nothing is
downloaded) in eager mode with the tensormorph plugin, attaches this
build's tmdb to rank 0's socket, sends requests over HTTP and checks the
breakpoint stop, the value printed, the trace and the request log.

Not part of `make check`: neither framework runs on the CPU machines the
testsuite runs on.  Run where vLLM or SGLang and a GPU are:

    TMDB=_build/src/tmdb/tmdb TENSORMORPH_LIB=_build/src/lib/.libs/libtensormorph.so \\
        python3 testsuite/serving/check_vllm.py

Exit status: 0 passed, 1 failed, 77 skipped (the reason is printed).
testsuite/serving/README says what a pass proves.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
PROBE_DIR = TOP / "probes" / "pytorch"
SKIP = 77


def skip(why: str) -> None:
    print(f"SKIP: {why}", flush=True)
    sys.exit(SKIP)


def fail(why: str) -> None:
    print(f"FAIL: {why}", flush=True)
    sys.exit(1)


def require(module: str) -> None:
    """Skips unless module imports, torch sees a GPU and TMDB is set."""
    try:
        __import__(module)
    except Exception as exc:
        skip(f"{module} is not importable here ({exc.__class__.__name__}: {exc})")
    import torch
    if not torch.cuda.is_available():
        skip("no CUDA GPU visible to torch")
    tmdb = os.environ.get("TMDB", "")
    if not tmdb or not os.access(tmdb, os.X_OK):
        skip("TMDB (this build's tmdb binary) is not set")
    lib = os.environ.get("TENSORMORPH_LIB", "")
    if lib and not os.path.exists(lib):
        skip(f"TENSORMORPH_LIB={lib} does not exist")


def tiny_model(where: Path) -> Path:
    """A 2-layer Llama with random weights and a word-level tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(125)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    d = where / "tiny-llama"
    fast.save_pretrained(d)
    cfg = LlamaConfig(vocab_size=len(words), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=256, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(torch.float16).save_pretrained(d)
    return d


def plugin_env(where: Path, **extra: str) -> dict[str, str]:
    """The environment of the server: the probe package on PYTHONPATH and
    its entry points visible to importlib.metadata (a dist-info written
    from pyproject.toml, as `pip install -e probes/pytorch` would)."""
    import tomllib
    proj = tomllib.loads((PROBE_DIR / "pyproject.toml").read_text())["project"]
    info = where / "site" / f"tensormorph_probe-{proj['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {proj['name']}\nVersion: {proj['version']}\n")
    lines = []
    for group, eps in proj.get("entry-points", {}).items():
        lines += [f"[{group}]"] + [f"{k} = {v}" for k, v in eps.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(where / "site"), str(PROBE_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                 else []))
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 300, headers: dict | None = None) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_ready(proc: subprocess.Popen, url: str, sockdir: Path, timeout: float = 900) -> Path:
    """Waits until the server answers url and rank 0 has a socket."""
    deadline = time.monotonic() + timeout
    sock = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"the server exited with status {proc.returncode} before it was ready")
        socks = sorted(sockdir.glob("*-rank0-*.sock"))
        sock = socks[0] if socks else None
        try:
            with urllib.request.urlopen(url, timeout=5):
                if sock is not None:
                    return sock
        except OSError:
            pass
        time.sleep(2)
    fail(f"the server was not ready within {timeout:g} s (socket: {sock})")
    raise AssertionError


class Server:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.fp = open(log, "w")  # noqa: SIM115
        print(f"starting {name}: {' '.join(argv)}", flush=True)
        self.proc = subprocess.Popen(argv, env=env, stdout=self.fp, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.fp.close()


def debug_one_request(sock: Path, send, rid: str) -> str:
    """tmdb attached to sock: a breakpoint on the request rid (the id the
    client gave; the engine may add to it), then that request (send()) in
    a thread; returns tmdb's output.  The breakpoint must stop the server's
    model in a forward that runs it, print a value and the batch's ids, and
    let it run on."""
    tm = subprocess.Popen([os.environ["TMDB"], "-nx", "-q"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert tm.stdin is not None and tm.stdout is not None
    tm.stdin.write(f"attach {sock}\ninfo probe\n"
                   f"break model.model.layers.0.mlp if request =~ \"*{rid}*\"\ncontinue\n"
                   "print tensor.numel\nprint step\nprint request\ndelete\ndetach\nquit\n")
    tm.stdin.flush()
    result: dict = {}

    def req() -> None:
        time.sleep(2)            # tmdb is attached and continuing
        try:
            result["answer"] = send()
        except Exception as exc:  # reported below
            result["error"] = exc

    t = threading.Thread(target=req)
    t.start()
    try:
        out, _ = tm.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        tm.kill()
        out, _ = tm.communicate()
        fail("tmdb did not finish:\n" + out)
    t.join(timeout=300)
    print(out, flush=True)
    if "error" in result:
        fail(f"the request failed: {result['error']}")
    if not re.search(r"Breakpoint 1, model\.model\.layers\.0\.mlp \(out\) at step \d+", out):
        fail("no breakpoint stop in tmdb's output")
    if not re.search(r"^\$1 = \d+", out, re.M):
        fail("no value printed at the stop")
    if not re.search(rf'^\$3 = \[.*{re.escape(rid)}', out, re.M):
        fail(f"the stop's batch (print request) does not hold {rid}")
    return out


def check_trace(trace: Path, framework: str, request_pattern: str) -> None:
    sys.path.insert(0, str(PROBE_DIR))
    import tensormorph_probe as tp
    if not trace.exists():
        fail(f"no trace at {trace}")
    with tp.Trace(str(trace)) as t:
        if t.meta.get("probe_kind") != framework:
            fail(f"trace probe kind {t.meta.get('probe_kind')!r}, expected {framework!r}")
        if t.meta.get("serving.eager") != "yes":
            fail(f"the server did not run eagerly: {t.meta.get('serving.eager')}")
        n = sum(1 for _ in t.records())
    if n == 0:
        fail("the trace holds no event")
    log = trace.with_suffix("").with_name(trace.stem + ".requests.jsonl")
    if not log.exists():
        fail(f"no request log at {log}")
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    ids = [r for e in steps for r in e["requests"]]
    if not any(re.search(request_pattern, r) for r in ids):
        fail(f"no request id like {request_pattern!r} in the request log: {ids[:10]}")
    # the trace's own copy (TQL `request`) says the same, step by step
    with tp.Trace(str(trace)) as t:
        for e in steps:
            got = t.annotation(e["step"])
            if got != (e["requests"], e["count"]):
                fail(f"step {e['step']}: the trace has {got}, the log {e}")
    print(f"trace: {n} records; request log: {len(ids)} ids", flush=True)


def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="tm-serving-"))


def cleanup(where: Path) -> None:
    if os.environ.get("TM_KEEP") != "1":
        shutil.rmtree(where, ignore_errors=True)
    else:
        print(f"kept {where}", flush=True)


def run(framework: str, plugins_var: str, argv, ask, answered, request_pattern: str) -> None:
    """The whole check of one framework: a tiny local model served with
    the plugin selected by plugins_var (argv(model, port) starts it), tmdb
    attached to rank 0's socket stops the request ask(base, prompt,
    max_tokens, rid) sends by its id, the server answers again after
    detach (answered(reply) says so), and the trace and the request log
    agree (an id like request_pattern among them)."""
    require(framework)
    where = workdir()
    model = tiny_model(where)
    sockdir = where / "socks"
    sockdir.mkdir(mode=0o700)
    trace = where / "serve.tmrun"
    port = free_port()
    env = plugin_env(where, **{plugins_var: "tensormorph"}, TENSORMORPH_LISTEN=str(sockdir),
                     TENSORMORPH_SERVING_PAUSE="120", TENSORMORPH_RECORD=str(trace),
                     TENSORMORPH_SERVING_STRICT="1")
    srv = Server(framework, argv(model, port), env, where / "server.log")
    try:
        base = f"http://127.0.0.1:{port}"
        sock = wait_ready(srv.proc, base + "/health", sockdir)
        out = debug_one_request(sock, lambda: ask(base, "w1 w2 w3", 4, "tmdb-check-1"),
                                "tmdb-check-1")
        if f"Recorded by: {framework} probe" not in out:
            fail(f"`info probe` does not name the {framework} probe")
        # the server runs on after detach
        ans = ask(base, "w4 w5", 2, None)
        if not answered(ans):
            fail(f"no answer after detach: {ans}")
    except SystemExit:
        print((where / "server.log").read_text()[-4000:])
        raise
    finally:
        srv.stop()
    check_trace(trace, framework, request_pattern)
    cleanup(where)
    print(f"PASS: {framework}", flush=True)
