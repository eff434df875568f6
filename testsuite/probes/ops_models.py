"""Real models whose first non-finite value is made by one operation inside
a module's forward (or outside every module), for the op-event tests
(test_ops.py) and their live runs (`tmdb --args python ops_models.py NAME`,
where the probe attaches by itself; TENSORMORPH_OPS says which ops).

  attn  an attention whose learned temperature reaches zero at step 2: the
        division by it makes the first Inf (line "scores = scores / ...").
  loss  a small residual CNN trained with a custom loss whose log of a
        vanishing softmax is -Inf at step 2, outside every module.
  fp16  an MLP in half precision whose matmul overflows at step 1.
"""

from __future__ import annotations

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.temperature = nn.Parameter(torch.tensor(1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = q @ k.transpose(-2, -1)
        scores = scores / self.temperature
        weights = torch.softmax(scores, dim=-1)
        return weights @ v


class AttnNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = Attention()
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.attn(x))


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class ResNetLike(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(Block(8), Block(8))
        self.fc = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(x.mean(dim=(2, 3)))


def sharp_loss(logits: torch.Tensor, target: torch.Tensor, scale: float) -> torch.Tensor:
    p = torch.softmax(logits * scale, dim=-1)
    return -torch.log(p.gather(1, target[:, None])).mean()


class MLP16(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(32, 64)
        self.down = nn.Linear(64, 8)
        with torch.no_grad():
            self.up.weight.fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x @ self.up.weight.t()
        return self.down(torch.relu(h))


def run_attn(steps: int = 3) -> None:
    torch.manual_seed(0)
    m = AttnNet()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(2, 5, 16)
    for step in range(steps):
        if step == 2:
            with torch.no_grad():
                m.attn.temperature.zero_()
        m(x).sum().backward()
        opt.step()
        opt.zero_grad()


def run_loss(steps: int = 3) -> None:
    torch.manual_seed(0)
    m = ResNetLike()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x, target = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
    for step in range(steps):
        loss = sharp_loss(m(x), target, 1.0 if step < 2 else 1e4)
        opt.zero_grad()
        loss.backward()
        opt.step()


def run_fp16(steps: int = 2) -> None:
    torch.manual_seed(0)
    m = MLP16().half()
    x = torch.randn(4, 32).half()
    for step in range(steps):
        with torch.no_grad():
            m(x * (1.0 if step == 0 else 1e4))


RUNS = {"attn": run_attn, "loss": run_loss, "fp16": run_fp16}

if __name__ == "__main__":
    RUNS[sys.argv[1]]()
