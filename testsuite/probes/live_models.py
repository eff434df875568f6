"""Programs for the live conformance test (test_live.py): each runs a real
model as an unmodified script would, deterministically, printing nothing,
so that tmdb can launch it (`tmdb --args python live_models.py NAME`) and
the probe's recording of the same run can be replayed with the same
command file.

    diverge  examples/train_diverge.py: a residual MLP trained with a learning
             rate so high that the loss goes to NaN
    gpt2     a 2-layer GPT-2 from a transformers config (random weights),
             two AdamW steps: keyword arguments, ModelOutput results
    cnn      a small ResNet-like CNN: BatchNorm, in-place ReLU, one block
             called twice (a shared module), two SGD steps
    compiled diverge's model under torch.compile(fullgraph=True) (test_compiled.py;
             backend from TM_BACKEND, default aot_eager: the probe's traced path
             is the same for every backend, inductor is slow to compile here)
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent


def diverge() -> None:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        runpy.run_path(str(HERE.parent.parent / "examples" / "train_diverge.py"),
                       run_name="__main__")


def compiled() -> None:
    import contextlib
    import io
    import os

    os.environ.setdefault("TM_BACKEND", "aot_eager")
    with contextlib.redirect_stdout(io.StringIO()):
        runpy.run_path(str(HERE / "compiled_train.py"), run_name="__main__")


def gpt2() -> None:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                  bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        out = model(input_ids=ids, labels=ids)
        opt.zero_grad()
        out.loss.backward()
        opt.step()


class Residual(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(x + self.bn(self.conv(x)))


class CNN(nn.Module):
    def __init__(self, c: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c),
                                  nn.ReLU(inplace=True))
        self.block = Residual(c)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.block(self.block(x))       # shared: called twice per step
        return self.fc(self.pool(x).flatten(1))


def cnn() -> None:
    torch.manual_seed(0)
    model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 3, 16, 16)
    y = torch.randint(0, 10, (4,))
    for _ in range(2):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


MODELS = {"diverge": diverge, "gpt2": gpt2, "cnn": cnn, "compiled": compiled}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MODELS:
        sys.exit(f"usage: live_models.py {'|'.join(MODELS)}")
    MODELS[sys.argv[1]]()
