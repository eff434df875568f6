"""One MLP, two GELUs: `python3 compare_gelu.py none` uses the exact (erf)
GELU everywhere, `python3 compare_gelu.py tanh` its tanh approximation in
the first activation -- the kind of change a port or a kernel swap makes.
Recorded both ways, tmdb compares the second run with the first and stops
where they part (doc/manual.md, "Comparing with a reference").
"""
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act1 = nn.GELU(approximate=approximate)
        self.fc2 = nn.Linear(32, 32)
        self.act2 = nn.GELU()
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act2(self.fc2(self.act1(self.fc1(x)))))


if __name__ == "__main__":
    approximate = sys.argv[1] if len(sys.argv) > 1 else "none"
    torch.manual_seed(0)
    model = Net(approximate)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for step in range(2):
            y = model(x)
            print(f"step {step}: output mean {y.mean().item():.6f}")
