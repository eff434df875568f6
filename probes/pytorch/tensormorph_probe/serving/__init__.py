"""Serving-framework plugins of the PyTorch probe: vLLM (entry point group
`vllm.general_plugins`) and SGLang (`sglang.srt.plugins`).  Each worker of
a server gets a tensormorph_probe.Probe with its own socket; see
doc/serving.md.  Importing this package imports neither framework."""

from .common import Session, Worker, requested, session_of, start, stop

__all__ = ["Session", "Worker", "requested", "session_of", "start", "stop"]
