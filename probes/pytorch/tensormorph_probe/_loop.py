"""The training loop as the probe sees it (doc/manual.md, "Steps"): what
tells a training iteration from a micro-batch and from an inference call,
and the frameworks' parts that say so.

The probe numbers steps from root calls (Probe._root_enter); this module
watches the rest of the loop and reports to the probe through a weak
reference, so that a patch left behind by another tool's wrapper holds
nothing:

  - every torch optimizer made (Optimizer.__init__; those alive when the
    probe attached are found once at attach): a process with an optimizer
    trains, and its grad-mode root calls are micro-batches of a step;
  - GradScaler.scale (the loss scale of the step) and GradScaler.step (an
    attempted optimizer step, which the scaler may skip);
  - evaluation scopes: HF Trainer.evaluate / predict, and a
    LightningModule's validation/test/predict steps, whose root calls join
    the current step instead of being steps of their own.

Each patch is undone by Probe.close (Probe._undo), unless another tool
replaced it since; then it stays and passes calls through.
"""

from __future__ import annotations

import functools
import gc
import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch

# LightningModule methods that are a root call of the model: the framework
# calls them, not the module's forward.  The evaluation ones join the
# current step (as HF Trainer.evaluate does).
LIGHTNING_STEPS = (("training_step", False), ("validation_step", True),
                   ("test_step", True), ("predict_step", True))


def _patch(owner: Any, name: str, make: Callable[[Any], Any], undo: list) -> None:
    """owner.name = make(original), undone later unless replaced since."""
    orig = owner.__dict__.get(name)
    if orig is None:
        return
    new = make(orig)
    functools.update_wrapper(new, orig)
    setattr(owner, name, new)

    def restore() -> None:
        if owner.__dict__.get(name) is new:
            setattr(owner, name, orig)
    undo.append(restore)


def install(probe: Any) -> None:
    """Optimizer and GradScaler patches, and the optimizers alive now."""
    ref = weakref.ref(probe)
    undo = probe._undo
    opt_cls = torch.optim.Optimizer

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            p = ref()
            if p is not None:
                p._optimizers.add(self)
        return __init__
    _patch(opt_cls, "__init__", make_init, undo)
    # optimizers made before the probe (attach(model) after the training
    # set-up): one look at the heap, at attach only
    for o in gc.get_objects():
        if issubclass(type(o), opt_cls):     # not isinstance: no __class__ lookups
            probe._optimizers.add(o)

    scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_cls is None:
        return

    def make_scale(orig: Any) -> Any:
        def scale(self: Any, outputs: Any) -> Any:
            p = ref()
            if p is not None and not p._closed and self.is_enabled():
                p._scaler_seen(self)
            return orig(self, outputs)
        return scale

    def make_step(orig: Any) -> Any:
        def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            p = ref()
            if p is None or p._closed or not self.is_enabled():
                return orig(self, optimizer, *args, **kwargs)
            p._scaler_seen(self)
            before = p._opt_steps
            try:
                return orig(self, optimizer, *args, **kwargs)
            finally:
                # the scaler calls optimizer.step only when no gradient
                # had an inf or NaN
                p._scaler_stepped(p._opt_steps == before)
        return step
    _patch(scaler_cls, "scale", make_scale, undo)
    _patch(scaler_cls, "step", make_step, undo)


def patch_frameworks(probe: Any) -> bool:
    """Evaluation scopes of the frameworks imported so far; True once
    nothing is left to look for."""
    done = True
    mod = sys.modules.get("transformers.trainer")
    trainer = getattr(mod, "Trainer", None) if mod is not None else None
    if trainer is None:
        done = False        # looked for again at the next root call: cheaply
    elif not probe._fw.get("transformers"):
        probe._fw["transformers"] = True
        ref = weakref.ref(probe)

        def make_eval(orig: Any) -> Any:
            def method(self: Any, *args: Any, **kwargs: Any) -> Any:
                p = ref()
                if p is None:
                    return orig(self, *args, **kwargs)
                p._eval_depth += 1
                try:
                    return orig(self, *args, **kwargs)
                finally:
                    p._eval_depth -= 1
            return method
        for name in ("evaluate", "predict"):
            _patch(trainer, name, make_eval, probe._undo)
    return done


def lightning_base(module: torch.nn.Module) -> type | None:
    """LightningModule when module is a (PyTorch) Lightning module."""
    for name in ("lightning.pytorch", "pytorch_lightning"):
        mod = sys.modules.get(name)
        cls = getattr(mod, "LightningModule", None) if mod is not None else None
        if cls is not None and isinstance(module, cls):
            return cls
    return None


def owner(module: torch.nn.Module) -> torch.nn.Module | None:
    """The module that holds module as a submodule, if any: module is in
    its parent's _modules dict, which is in the parent's __dict__.  A look
    at the heap's referrers, once per root found."""
    for mods in gc.get_referrers(module):
        if type(mods) is not dict:
            continue
        for attrs in gc.get_referrers(mods):
            if type(attrs) is not dict or attrs.get("_modules") is not mods:
                continue
            for o in gc.get_referrers(attrs):
                if isinstance(o, torch.nn.Module) and getattr(o, "__dict__", None) is attrs:
                    return o
    return None
