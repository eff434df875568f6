"""A model whose top module has 100 submodules (dap-bench: the variables
of a 100-node module).  Runs a few training steps under the probe."""
import torch
from torch import nn


class Wide(nn.Module):
    def __init__(self, n: int = 100, d: int = 8) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def main() -> None:
    torch.manual_seed(0)
    model = Wide()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    for step in range(3):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
