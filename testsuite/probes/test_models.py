"""Real models under the probe: GPT-2 and Llama from small transformers
configs (random weights, no downloads), a CNN with in-place ReLU and
BatchNorm in train and eval mode, a kwargs-only module with dict outputs, a
shared-weight model and inference_mode.  Each is checked through the trace
read back by libtensormorph, and against a run without the probe."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_gap_free, read

import tensormorph_probe as tp

transformers = pytest.importorskip("transformers")


def _tokens(vocab, b=2, t=12, seed=0):
    return torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(seed))


def _lm_run(make, trace_path, level):
    """Forward + backward of a causal LM; returns loss, logits, grads."""
    torch.manual_seed(0)
    model = make()
    ids = _tokens(model.config.vocab_size)
    probe = tp.attach(model, level=level, record=trace_path) if trace_path else None
    try:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    finally:
        if probe:
            probe.close()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return out.loss.detach(), out.logits.detach(), grads


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg)


@pytest.mark.parametrize("make,block", [(_gpt2, "model.transformer.h.1"),
                                        (_llama, "model.model.layers.1")], ids=["gpt2", "llama"])
def test_causal_lm_forward_backward(trace_path, make, block):
    ref = _lm_run(make, None, 0)
    got = _lm_run(make, trace_path, 2)
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])
    assert all(torch.equal(a, b) for a, b in zip(ref[2], got[2], strict=True))

    nodes, events, gaps = read(trace_path)
    assert not gaps
    assert_gap_free(events, gaps, len(events))
    assert block in nodes
    root_exit = next(e for e in events if e.node == "model" and e.kind == "exit")
    # ModelOutput flattened in field order: loss, logits (non-tensors skipped)
    assert root_exit.tensors[0].shape == () and root_exit.tensors[0].slot == "out.0"
    assert root_exit.tensors[1].shape == (2, 12, 97)
    assert root_exit.tensors[0].stats["mean"] == pytest.approx(got[0].item(), rel=1e-6)
    # the decoder block is called with keyword arguments; they are inputs too
    enter = next(e for e in events if e.node == block and e.kind == "enter")
    assert len(enter.tensors) >= 1 and enter.tensors[0].shape == (2, 12, 32)
    bwd = {t.slot for e in events if e.node == block and e.kind == "bwd" for t in e.tensors}
    assert "grad_out.0" in bwd
    assert any(e.kind == "param" for e in events)


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(inplace=True))
        self.head = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def _cnn_run(trace_path):
    torch.manual_seed(0)
    model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    probe = tp.attach(model, level=2, record=trace_path) if trace_path else None
    outs = []
    for _ in range(2):
        model.train()
        loss = torch.nn.functional.cross_entropy(model(x), torch.arange(4))
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            outs.append(model(x))
    if probe:
        probe.close()
    return outs, model.features[1].running_mean.clone()


def test_cnn_inplace_train_eval(trace_path):
    ref_outs, ref_rm = _cnn_run(None)
    outs, rm = _cnn_run(trace_path)
    assert all(torch.equal(a, b) for a, b in zip(ref_outs, outs, strict=True))
    assert torch.equal(ref_rm, rm)
    nodes, events, _ = read(trace_path)
    relu = [e for e in events if e.node == "model.features.2" and e.kind == "exit"]
    assert len(relu) == 4 and relu[0].tensors[0].stats["min"] >= 0
    # train step 0, then an evaluation outside any evaluation scope: a step
    # of its own (doc/manual.md "Steps"; test_loop.py has the scoped one)
    assert [e.step for e in relu] == [0, 1, 2, 3]
    bwd = [e for e in events if e.node == "model.features.0" and e.kind == "bwd"]
    assert len(bwd) == 2                              # grad_out once per train step
    assert "model.features.1.weight" in nodes


class KwDict(torch.nn.Module):
    """Keyword-only call, dict output with a nested tuple and a non-tensor."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, *, x, mask=None, scale=2.0):
        h = self.proj(x) * scale
        if mask is not None:
            h = h.masked_fill(mask, 0.0)
        return {"h": h, "pair": (h.sum(), h.mean(-1)), "n": 3, "none": None}


def test_kwargs_only_and_dict_outputs(trace_path):
    model = KwDict()
    x = torch.randn(2, 6)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[0, 0] = True
    with tp.attach(model, level=2, record=trace_path):
        out = model(x=x, mask=mask)
    _, events, _ = read(trace_path)
    enter = next(e for e in events if e.node == "model" and e.kind == "enter")
    assert [(t.slot, t.shape) for t in enter.tensors] == [("in.0", (2, 6)), ("in.1", (2, 6))]
    assert enter.tensors[1].stats["numel"] == 12 and enter.tensors[1].stats["max"] == 1
    exit_ = next(e for e in events if e.node == "model" and e.kind == "exit")
    assert [(t.slot, t.shape) for t in exit_.tensors] == [
        ("out.0", (2, 6)), ("out.1", ()), ("out.2", (2,))]
    assert exit_.tensors[1].stats["mean"] == pytest.approx(out["pair"][0].item(), rel=1e-6)
    assert exit_.tensors[0].stats["zero_count"] >= 1


class Shared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.nn.Linear(4, 4)
        self.alias = self.block                     # same module under two names

    def forward(self, x):
        for _ in range(3):
            x = torch.tanh(self.block(x))
        return self.alias(x)


def test_shared_module_calls_are_numbered_per_step(trace_path):
    model = Shared()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tp.attach(model, level=1, record=trace_path):
        for _ in range(2):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    nodes, events, _ = read(trace_path)
    assert "model.block" in nodes and "model.alias" not in nodes
    exits = [(e.step, e.call) for e in events if e.node == "model.block" and e.kind == "exit"]
    assert exits == [(0, 1), (0, 2), (0, 3), (0, 4), (1, 1), (1, 2), (1, 3), (1, 4)]


def test_inference_mode_and_no_grad(trace_path):
    model = _gpt2()
    model.eval()
    ids = _tokens(97)
    with torch.inference_mode():
        ref = model(input_ids=ids).logits
    with tp.attach(model, level=2, record=trace_path):
        with torch.inference_mode():
            got = model(input_ids=ids).logits
        with torch.no_grad():
            got2 = model(input_ids=ids).logits
    assert torch.equal(ref, got) and torch.equal(ref, got2)
    _, events, _ = read(trace_path)
    assert not any(e.kind == "bwd" for e in events)
    exits = [e for e in events if e.node == "model.lm_head" and e.kind == "exit"]
    assert len(exits) == 2
    assert exits[0].tensors[0].stats["abs_max"] == pytest.approx(ref.abs().max().item())
