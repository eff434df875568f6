"""A small training run that diverges: the learning rate is far too high.

Used by ./demo: recorded with tensormorph-probe, then debugged with tmdb,
which stops at the first module whose output holds a NaN.
"""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self, d_in: int = 16, d: int = 32, n_layers: int = 4) -> None:
        super().__init__()
        self.embed = nn.Linear(d_in, d)
        self.layers = nn.ModuleList(Block(d) for _ in range(n_layers))
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def main() -> None:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=3.0)
    x = torch.randn(64, 16)
    y = torch.randn(64, 1)
    for step in range(8):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step:2d}  loss {loss.item():.4g}")


if __name__ == "__main__":
    main()
