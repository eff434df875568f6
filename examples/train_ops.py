"""Attention whose softmax temperature is annealed to zero: at step 2 the
division by it makes Inf, the softmax turns that into NaN, and every module
after it passes the NaN on.  The module-level NaN breakpoint stops at the
attention's output; with op events (tensormorph-probe record --ops
model.attn) tmdb finds the division itself and its line (doc/manual.md,
"Operations").
"""
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.temperature = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / self.temperature
        weights = torch.softmax(scores, dim=-1)
        return self.out(weights @ v)


class Net(nn.Module):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.embed = nn.Linear(16, d)
        self.attn = Attention(d)
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return self.head(h + self.attn(h))


def main() -> None:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 10, 16), torch.randn(8, 10, 1)
    for step in range(4):
        model.attn.temperature = 1.0 - step / 2     # annealed: 1, 0.5, 0, ...
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
