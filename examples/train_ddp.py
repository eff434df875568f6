"""A small data-parallel training job: torch.distributed DDP, gloo, on CPU.

    torchrun --standalone --nproc-per-node=2 examples/train_ddp.py \
        --steps 6 --nan-rank 1 --nan-step 3

Every rank trains the same model on its own shard of a synthetic data set;
DDP averages the gradients.  With --nan-rank R --nan-step S, rank R gets a
bad sample at step S: one of its dense features is NaN.  The first module
output holding a NaN anywhere in the job is then model.proj's on rank R at
step S (call 1); model.embed, called just before it on the same batch, is
still clean.  From the backward of that step on, the averaged gradients
carry the NaN to every rank, so from step S+1 every rank's outputs are NaN.

With --skew-rank R --skew-step S, rank R's model.fc weights drift by 0.1%
after the update of step S, as a bad checkpoint load or a rank-local
optimizer bug would: the ranks now disagree, which `find spread(@*:
model.fc.weight:data.l2) > 0` finds (a recording at level 2).

Recorded per rank with the probe:

    python -m tensormorph_probe record -o out/run.tmrun -- \
        torchrun --standalone --nproc-per-node=2 examples/train_ddp.py --nan-rank 1 --nan-step 3

writes out/run.rank0.tmrun, out/run.rank1.tmrun and out/run.manifest.
Nothing is printed unless something goes wrong; the exit status is 0.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

VOCAB, TOKENS, FEATURES, D, CLASSES, BATCH = 64, 6, 8, 32, 4, 16


class Net(nn.Module):
    """A bag of tokens plus dense features, classified by a small MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.proj = nn.Linear(FEATURES, D)
        self.fc = nn.Linear(D, D)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, tokens: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens).mean(dim=1) + self.proj(features)
        return self.head(self.norm(self.act(self.fc(x))))


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rank `rank`'s shard at `step`: the same numbers on every run."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    tokens = torch.randint(0, VOCAB, (BATCH, TOKENS), generator=g)
    features = torch.randn(BATCH, FEATURES, generator=g)
    labels = torch.randint(0, CLASSES, (BATCH,), generator=g)
    return tokens, features, labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6, help="optimizer steps (6)")
    ap.add_argument("--nan-rank", type=int, default=-1, metavar="R",
                    help="the rank that gets the bad sample (default: none)")
    ap.add_argument("--nan-step", type=int, default=-1, metavar="S",
                    help="the step at which it gets it (default: none)")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (0.1)")
    ap.add_argument("--skew-rank", type=int, default=-1, metavar="R",
                    help="the rank whose model.fc weights drift from the others' "
                    "(default: none)")
    ap.add_argument("--skew-step", type=int, default=-1, metavar="S",
                    help="the step after whose update they drift (default: none)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)            # the same initial weights on every rank
    model = DistributedDataParallel(Net())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for step in range(args.steps):
        tokens, features, labels = batch(rank, step)
        if rank == args.nan_rank and step == args.nan_step:
            features[3, 5] = float("nan")
        loss = F.cross_entropy(model(tokens, features), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == args.skew_rank and step == args.skew_step:
            # a silent desync: DDP averages gradients, never weights, so
            # from here on this rank trains a different model
            with torch.no_grad():
                model.module.fc.weight.mul_(1.001)
    dist.barrier()
    # DDP's reducer holds the process group.  Dropped last, at the end of
    # main(), it destroys the group with the GIL held, while gloo's worker
    # thread may still need the GIL to free a finished collective: torch
    # then hangs at exit, now and then.  Dropped first, the group is freed
    # by destroy_process_group, which releases the GIL.
    del model, opt
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
