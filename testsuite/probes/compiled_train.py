"""examples/train_diverge.py's model trained compiled, as a user would:
`torch.compile(model, fullgraph=True)`, a learning rate so high that the loss
goes to NaN.  Prints each step's loss and, at the end, dynamo's graph-break
count, so that a test can check that the probe changes neither.

    TM_COMPILE=0        eager (the reference recording)
    TM_BACKEND=NAME     dynamo backend (default inductor)
    TM_MODE=NAME        torch.compile mode (e.g. reduce-overhead)
    TM_STEPS=N          steps (default 6)
    TM_CACHE_COUNTS=1   also print how inductor's caches on disk answered
"""

import os
import runpy
from pathlib import Path

import torch
from torch import nn

ex = runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "train_diverge.py"))


def main() -> None:
    torch.manual_seed(0)
    model = ex["Net"]()
    opt = torch.optim.SGD(model.parameters(), lr=3.0)
    x = torch.randn(64, 16)
    y = torch.randn(64, 1)
    run = model
    if os.environ.get("TM_COMPILE", "1") != "0":
        run = torch.compile(model, fullgraph=True,
                            backend=os.environ.get("TM_BACKEND", "inductor"),
                            mode=os.environ.get("TM_MODE") or None)
    for step in range(int(os.environ.get("TM_STEPS", "6"))):
        loss = nn.functional.mse_loss(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step:2d}  loss {loss.item():.4g}")
    from torch._dynamo.utils import counters
    print("graph breaks:", sum(counters["graph_break"].values()))
    if os.environ.get("TM_CACHE_COUNTS"):
        for group in ("inductor", "aot_autograd"):
            print(group, *sorted(f"{k}={v}" for k, v in counters[group].items() if "cache" in k))


if __name__ == "__main__":
    main()
