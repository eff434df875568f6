# model.py -- the toy transformer that testsuite/lib/mktrace.c pretends to
# have recorded.  The synthetic traces point their node source locations at
# the `forward` lines of this file so that tmdb's `list` and stop lines can
# show real source.  It is never run by the test suite.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.randn(3 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (x @ self.in_proj_weight.T).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
        return att.softmax(dim=-1) @ v


class MLP(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h = self.act(h)
        return self.fc2(h)


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.attn = Attention(dim)
        self.mlp = MLP(dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x)
        x = x + self.mlp(x)
        return self.norm(x)


class Linear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)


class GELU(nn.GELU):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)


class LayerNorm(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)


class Embedding(nn.Embedding):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)


class Model(nn.Module):
    def __init__(self, vocab: int = 100, dim: int = 64, layers: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)
