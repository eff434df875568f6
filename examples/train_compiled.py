"""train_diverge.py's run with the model compiled: torch.compile(model,
fullgraph=True).  The probe records it as it records the eager run, from
inside the compiled graph (doc/manual.md, "Compiled models")."""
import torch
from torch import nn
from train_diverge import Net


def main() -> None:
    torch.manual_seed(0)
    model = Net()
    compiled = torch.compile(model, fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=3.0)
    x = torch.randn(64, 16)
    y = torch.randn(64, 1)
    for step in range(8):
        loss = nn.functional.mse_loss(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step:2d}  loss {loss.item():.4g}")


if __name__ == "__main__":
    main()
