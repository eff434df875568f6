"""Ranks that never wait for each other, for the all-stop tests of
test_multirank.py: `torchrun --nproc-per-node=2 ranks_model.py STEPS DONE`.

Every rank joins a gloo process group (a real torch.distributed job) and
then trains a model of its own with no collective, sleeping a little each
step, so that a rank runs on unless the debugger pauses it.  Rank 1 trains
STEPS steps, its input NaN at step 3 (the first NaN output of the job), and
then creates the file DONE; the other ranks train until DONE exists, so
they are still running whenever rank 1 stops, however slow the machine.
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    steps, done = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    deadline = time.monotonic() + 300
    step = 0
    while (step < steps if rank == 1 else not os.path.exists(done)) and \
            time.monotonic() < deadline:
        x = torch.randn(4, 8)
        if rank == 1 and step == 3:
            x[0, 0] = float("nan")
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.01)
        step += 1
    if rank == 1:
        open(done, "w").close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
