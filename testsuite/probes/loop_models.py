"""Training loops as the frameworks run them (test_loop.py): each script is
unmodified by the probe (tmdb launches it, `tmdb --args python
loop_models.py NAME`, or TENSORMORPH_RECORD records it), trains a tiny
model deterministically and plants a NaN at a step it chooses, printing
that step as the framework counts it ("nan: step S micro M") so that the
test can compare it with the step tmdb names.

    accum      a plain loop, 4 micro-batches a step (gradient accumulation)
    scaler     a GradScaler loop whose scaler skips the overflows planted at
               iterations 2 and 5, then a NaN in the forward at iteration 7
    generate   3 training steps of a 2-layer GPT-2, then generate() calls
    hf         the transformers Trainer, gradient_accumulation_steps=4 and
               an evaluation every 3 steps; the NaN at global step 7
    lightning  a LightningModule whose training_step calls self.net and
               self.loss; accumulate_grad_batches=2 and validation
    accelerate an Accelerator with gradient_accumulation_steps=2
    logging    a loop whose logging between forwards (into the file named by
               argv[2]) takes 0.6 s a step: what runs between events
    raises     a GradScaler loop: the scaler skips the overflow of iteration
               2, the forward of iteration 4 raises FloatingPointError in
               model.1 (the script skips that batch), a NaN at iteration 6
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
from torch import nn

NAN = float("nan")


def _say(msg: str) -> None:
    print(msg, flush=True)


def _mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))


def accum() -> None:
    torch.manual_seed(0)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
    micro = 4
    for step in range(8):
        for m in range(micro):
            x = data[(step * micro + m) % 64:][:4]
            if step == 5 and m == 2:
                with torch.no_grad():
                    model[2].weight[0, 0] = NAN
                _say(f"nan: step {step} micro {m + 1}")
            loss = model(x).pow(2).mean() / micro
            loss.backward()
        opt.step()
        opt.zero_grad()


def scaler() -> None:
    torch.manual_seed(0)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sc = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1000)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    for it in range(9):
        if it == 7:
            x = x.clone()
            x[0, 0] = NAN
            _say(f"nan: step {it} micro 1")
        loss = model(x).pow(2).mean()
        if it in (2, 5):
            loss = loss * 1e38      # the scaled loss overflows: expected
        before = sc.get_scale()
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()
        opt.zero_grad()
        if sc.get_scale() < before:
            _say(f"skipped: step {it} scale {before:g}")


class _Check(nn.Module):
    """Raises on an activation too large to be right (as anomaly checks do)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.abs().max() > 1e20:
            raise FloatingPointError("activation overflow in model.1")
        return torch.tanh(x)


def raises() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), _Check(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sc = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1000)
    x0 = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    steps = 0       # optimizer steps attempted: the probe's step
    for it in range(8):
        x = x0.clone()
        if it == 4:
            x[0, 0] = 1e30
        if it == 6:
            x[0, 0] = NAN
            _say(f"nan: step {steps} micro 1")
        try:
            loss = model(x).pow(2).mean()
        except FloatingPointError as exc:
            _say(f"raise: step {steps} {exc}")
            continue        # the batch is skipped: no optimizer step
        if it == 2:
            loss = loss * 1e38      # the scaled loss overflows: skipped
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()
        opt.zero_grad()
        steps += 1


def logging() -> None:
    import time
    torch.manual_seed(0)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with open(sys.argv[2], "w", buffering=1) as log:
        for step in range(1000):
            model(torch.randn(4, 8)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            for k in range(30):         # no module runs here: no events
                log.write(f"step {step} {k}\n")
                time.sleep(0.02)


def generate() -> None:
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2,
                                  n_head=2, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 97, (2, 8), generator=torch.Generator().manual_seed(1))
    for step in range(3):
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    for k in range(4):
        model.generate(ids[:1, :4], max_new_tokens=1, do_sample=False)
        _say(f"generate: call {k + 1} step {3 + k}")


def hf() -> None:
    import transformers
    from transformers import Trainer, TrainingArguments
    transformers.logging.set_verbosity_error()

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(97, 16)
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 16))
            self.head = nn.Linear(16, 97)
            self.lossfn = nn.CrossEntropyLoss()
            self.state: dict[str, int] = {}

        def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
            h = self.emb(input_ids)
            st = self.state
            if self.training and st.get("step") == 7 and st.get("micro") == 3:
                with torch.no_grad():
                    self.mlp[2].weight[0, 0] = NAN
            logits = self.head(self.mlp(h))
            out = {"logits": logits}
            if labels is not None:
                out["loss"] = self.lossfn(logits.reshape(-1, 97), labels.reshape(-1))
            return out

    class Tell(Trainer):
        """The trainer's own count: global_step, and the micro-batch in it."""
        def training_step(self, model, inputs, *a, **k):  # noqa: ANN001
            net.state["micro"] = net.state.get("micro", 0) + 1 \
                if net.state.get("seen") == self.state.global_step else 1
            net.state["seen"] = self.state.global_step
            net.state["step"] = self.state.global_step
            if net.state["step"] == 7 and net.state["micro"] == 3:
                _say(f"nan: step {self.state.global_step} micro {net.state['micro']}")
            return super().training_step(model, inputs, *a, **k)

    torch.manual_seed(0)
    net = Net()
    g = torch.Generator().manual_seed(1)
    rows = [{"input_ids": t, "labels": t} for t in torch.randint(0, 97, (80, 6), generator=g)]
    out = tempfile.mkdtemp(prefix="tm-hf-")
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=2,
                             gradient_accumulation_steps=4, max_steps=9, learning_rate=1e-3,
                             eval_strategy="steps", eval_steps=3, per_device_eval_batch_size=4,
                             logging_strategy="no", save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, seed=0, dataloader_num_workers=0)
    Tell(model=net, args=args, train_dataset=rows, eval_dataset=rows[:8]).train()


def lightning() -> None:
    import logging
    import warnings

    import lightning as L
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    class Lit(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp()
            self.loss = nn.MSELoss()

        def training_step(self, batch, batch_idx):  # noqa: ANN001
            x, y = batch
            if self.global_step == 5 and batch_idx % 2 == 1 and not hasattr(self, "done"):
                self.done = True
                with torch.no_grad():
                    self.net[2].weight[0, 0] = NAN
                _say(f"nan: step {self.global_step} micro 2")
            return self.loss(self.net(x), y)

        def validation_step(self, batch, batch_idx):  # noqa: ANN001
            x, y = batch
            return self.loss(self.net(x), y)

        def configure_optimizers(self):  # noqa: ANN201
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    ds = torch.utils.data.TensorDataset(torch.randn(64, 8, generator=g),
                                        torch.randn(64, 4, generator=g))
    dl = torch.utils.data.DataLoader(ds, batch_size=4)
    trainer = L.Trainer(max_steps=8, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accumulate_grad_batches=2,
                        limit_val_batches=2, val_check_interval=6, num_sanity_val_steps=1)
    trainer.fit(Lit(), dl, dl)


def accelerate() -> None:
    from accelerate import Accelerator
    torch.manual_seed(0)
    acc = Accelerator(cpu=True, gradient_accumulation_steps=2)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    ds = torch.utils.data.TensorDataset(torch.randn(64, 8, generator=g),
                                        torch.randn(64, 4, generator=g))
    dl = torch.utils.data.DataLoader(ds, batch_size=4)
    model, opt, dl = acc.prepare(model, opt, dl)
    lossfn = nn.MSELoss()
    done = 0        # optimizer steps, as the loop counts them
    micro = 0
    for x, y in dl:
        micro += 1
        with acc.accumulate(model):
            if done == 3 and micro == 2:
                with torch.no_grad():
                    model[2].weight[0, 0] = NAN
                _say(f"nan: step {done} micro {micro}")
            acc.backward(lossfn(model(x), y))
            opt.step()
            opt.zero_grad()
        if acc.sync_gradients:
            done += 1
            micro = 0
        if done == 6:
            break


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    globals()[sys.argv[1]]()
