"""Programs for the comparison tests (test_compare.py, doc/manual.md
"Comparing with a reference"): pairs of real models that should compute the
same thing, each run as an unmodified script would (deterministic, printing
nothing), so that tmdb can launch one live (`tmdb --reference REF.tmrun
--args python compare_models.py NAME`) or `tensormorph-probe record` can
record it.

    gelu_erf, gelu_tanh   an MLP whose first GELU uses the exact (erf) or the
                          tanh approximation: the runs part at that GELU, step 0
    fp32, bf16            the same MLP trained 8 SGD steps in float32 and in
                          bfloat16: a divergence that grows with the steps
    llama                 an HF LlamaForCausalLM (transformers config, 2
                          layers, random weights, seeded), two forwards
    fused                 a re-implementation of it with fused q/k/v (one
                          Linear), named differently, with the same weights
    fused_bug             the same with a wrong RMSNorm eps in layer 1's
                          post-attention norm
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn


# the manual's example is the MLP of the GELU pair: one model, not two copies
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from compare_gelu import Net as MLP  # noqa: E402


def _gelu(approximate: str) -> None:
    torch.manual_seed(0)
    model = MLP(approximate)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for _ in range(2):
            model(x)


def _train(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = MLP("none").to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 16, generator=g).to(dtype)
    y = torch.randn(32, 4, generator=g).to(dtype)
    for _ in range(8):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def _llama_config():
    import transformers

    return transformers.LlamaConfig(
        vocab_size=101, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, rope_theta=10000.0, attn_implementation="eager",
        tie_word_embeddings=False)


def _hf_llama():
    import transformers

    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(_llama_config()).eval()


def _copy(m: nn.Module) -> nn.Module:
    """A module of its own with m's weights (the HF model is not kept: the
    probe would take its owner for the model)."""
    import copy

    return copy.deepcopy(m)


def _ids() -> torch.Tensor:
    return torch.randint(0, 101, (2, 10), generator=torch.Generator().manual_seed(2))


class RMSNorm(nn.Module):
    def __init__(self, weight: torch.Tensor, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone())
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(v + self.eps)).to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class FusedAttention(nn.Module):
    """q, k and v from one Linear (the HF model has three)."""

    def __init__(self, hf, cfg) -> None:
        super().__init__()
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.dim = cfg.hidden_size // self.heads
        self.qkv = nn.Linear(cfg.hidden_size, (self.heads + 2 * self.kv_heads) * self.dim,
                             bias=False)
        with torch.no_grad():
            self.qkv.weight.copy_(torch.cat([hf.q_proj.weight, hf.k_proj.weight,
                                             hf.v_proj.weight]))
        self.o_proj = nn.Linear(self.heads * self.dim, cfg.hidden_size, bias=False)
        with torch.no_grad():
            self.o_proj.weight.copy_(hf.o_proj.weight)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split([self.heads * self.dim, self.kv_heads * self.dim,
                                     self.kv_heads * self.dim], dim=-1)
        q = q.view(b, t, self.heads, self.dim).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(2, 3)) * self.dim ** -0.5
        mask = torch.full((t, t), float("-inf")).triu(1)
        p = torch.softmax((s + mask).float(), dim=-1).to(q.dtype)
        return self.o_proj((p @ v).transpose(1, 2).reshape(b, t, -1))


class FusedMLP(nn.Module):
    def __init__(self, hf) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = _copy(hf.gate_proj), _copy(hf.up_proj)
        self.down_proj = _copy(hf.down_proj)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, hf, cfg, eps2: float) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(hf.input_layernorm.weight, cfg.rms_norm_eps)
        self.attn = FusedAttention(hf.self_attn, cfg)
        self.mlp_norm = RMSNorm(hf.post_attention_layernorm.weight, eps2)
        self.mlp = FusedMLP(hf.mlp)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Fused(nn.Module):
    """The re-implementation: embed, blocks.N.{attn_norm, attn.{qkv, o_proj},
    mlp_norm, mlp.*}, norm, lm_head."""

    def __init__(self, hf, bug: bool = False) -> None:
        super().__init__()
        cfg = hf.config
        self.embed = _copy(hf.model.embed_tokens)
        self.blocks = nn.ModuleList(
            Block(layer, cfg, 1e-1 if bug and i == 1 else cfg.rms_norm_eps)
            for i, layer in enumerate(hf.model.layers))
        self.norm = RMSNorm(hf.model.norm.weight, cfg.rms_norm_eps)
        self.lm_head = _copy(hf.lm_head)
        self.inv_freq = hf.model.rotary_emb.inv_freq.detach().clone()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        freqs = torch.arange(t).float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        x = self.embed(input_ids)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.lm_head(self.norm(x))


# The map that aligns Fused (the run) with the HF model (the reference).
FUSED_MAP = [
    "model.embed=model.model.embed_tokens",
    "model.blocks.*.attn_norm=model.model.layers.*.input_layernorm",
    "model.blocks.*.mlp_norm=model.model.layers.*.post_attention_layernorm",
    "model.blocks.*.attn=model.model.layers.*.self_attn",
    "model.blocks.*=model.model.layers.*",
    "model.norm=model.model.norm",
]


def _fused(bug: bool) -> Fused:
    import gc

    hf = _hf_llama()
    model = Fused(hf, bug)
    del hf
    gc.collect()
    return model


def _infer(model: nn.Module) -> None:
    ids = _ids()
    with torch.no_grad():
        for _ in range(2):
            model(ids)


MODELS = {
    "gelu_erf": lambda: _gelu("none"),
    "gelu_tanh": lambda: _gelu("tanh"),
    "fp32": lambda: _train(torch.float32),
    "bf16": lambda: _train(torch.bfloat16),
    "llama": lambda: _infer(_hf_llama()),
    "fused": lambda: _infer(_fused(False)),
    "fused_bug": lambda: _infer(_fused(True)),
}

LEVELS = {"gelu_erf": 3, "gelu_tanh": 3, "fp32": 3, "bf16": 3}


def record_all(outdir: str) -> None:
    """Records every model into OUTDIR/NAME.tmrun in this one process (one
    torch start-up for all: the tests stay quick)."""
    import os

    import tensormorph_probe as tp

    try:
        import transformers  # noqa: F401
        have_hf = True
    except ImportError:       # the Llama pair is left out (test_compare skips it)
        have_hf = False
    for name, fn in MODELS.items():
        if not have_hf and name in ("llama", "fused", "fused_bug"):
            continue
        with tp.attach(None, level=LEVELS.get(name, 2),
                       record=os.path.join(outdir, f"{name}.tmrun")):
            fn()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--record-all":
        record_all(sys.argv[2])
    elif len(sys.argv) != 2 or sys.argv[1] not in MODELS:
        sys.exit(f"usage: compare_models.py {'|'.join(MODELS)} | --record-all DIR")
    else:
        MODELS[sys.argv[1]]()
