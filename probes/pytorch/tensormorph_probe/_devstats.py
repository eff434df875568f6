"""Stats of a tensor that does not live in host memory, computed on its device.

On CUDA (or any non-CPU device) the stats of ARCHITECTURE 5 are reduced with
fused torch ops whose results stay on the device; the probe stacks them and
copies them to the host once per batch, so no module call waits on a host
sync.  CPU tensors never come here: libtensormorph reads them in one pass.
The definitions follow tm_stats_compute (src/lib/stats.c, tm-stats.h): min,
max, mean, abs_max, l2 and std (population) over the finite elements; the
histogram (TM_HIST_LOG2) counts them by sign bit and octave in the 16
octaves below 2^E, E = floor(log2 abs_max) + 1, the innermost bin of each
sign holding every smaller magnitude and zero.

The vector layout matches struct tm_rec_tensor: 12 stats (tm_stat order),
hist_lo, hist_hi, 32 histogram counts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ._lib import TM_HIST_BINS, TM_STAT_COUNT

VEC_LEN = TM_STAT_COUNT + 2 + TM_HIST_BINS
HALF = TM_HIST_BINS // 2


@contextlib.contextmanager
def sync_allowed() -> Iterator[None]:
    """The probe's one host copy of a batch's device stats (or of a
    compiled region's): the sync it means to make, exempt from
    torch.cuda.set_sync_debug_mode, which then flags any other
    (testsuite/perf/gpu-check runs the probed steps with "error")."""
    mode = torch.cuda.get_sync_debug_mode() if torch.cuda.is_initialized() else 0
    if mode:
        torch.cuda.set_sync_debug_mode(0)
    try:
        yield
    finally:
        if mode:
            torch.cuda.set_sync_debug_mode(mode)


def _ilog2(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(v's bits as integers, floor(log2 |v|)) of float64 (float32 on MPS)
    values; meaningless where v is 0.  A subnormal is scaled up first."""
    if v.dtype == torch.float64:
        it, shift, mask, bias, up, k = torch.int64, 52, 0x7FF, 1023, 2.0 ** 64, 64
    else:
        it, shift, mask, bias, up, k = torch.int32, 23, 0xFF, 127, 2.0 ** 32, 32
    bits = v.view(it)
    sub = ((bits >> shift) & mask) == 0
    f = (torch.where(sub, v * up, v).view(it) >> shift) & mask
    return bits, f.to(torch.int64) - bias - torch.where(sub, k, 0)


def device_stats(t: torch.Tensor, level: int) -> torch.Tensor:
    """Float64 vector of VEC_LEN on t's device; nothing is synchronised."""
    x = t.detach()
    if x.is_complex():
        x = x.abs()
    acc = torch.float64 if x.device.type != "mps" else torch.float32
    x = x.reshape(-1).to(acc)
    n = x.numel()
    out = torch.zeros(VEC_LEN, dtype=acc, device=x.device)
    out[0].fill_(n)     # (out[0] = n would copy n from the host, a sync on CUDA)
    if n == 0:
        return out
    finite = torch.isfinite(x)
    posinf = x == float("inf")
    neginf = x == float("-inf")
    nfin = finite.sum()
    zero = torch.zeros((), dtype=acc, device=x.device)
    inf_ = torch.full((), float("inf"), dtype=acc, device=x.device)     # (no host copy)
    xf = torch.where(finite, x, zero)
    mn = torch.where(finite, x, inf_).min()
    mx = torch.where(finite, x, -inf_).max()
    denom = nfin.clamp(min=1).to(acc)
    # shifted sums, as in C, so that a large mean does not eat the spread
    k = torch.where(finite.any(), mn, zero)
    d = torch.where(finite, x - k, zero)
    s1 = d.sum()
    out[1] = torch.isnan(x).sum()
    out[2] = posinf.sum() + neginf.sum()
    out[3] = posinf.sum()
    out[4] = neginf.sum()
    out[5] = mn
    out[6] = mx
    out[7] = k + s1 / denom
    out[8] = torch.maximum(mn.abs(), mx.abs())
    out[9] = (xf * xf).sum().sqrt()
    if level >= 2:
        m1 = s1 / denom
        out[10] = ((d * d).sum() / denom - m1 * m1).clamp(min=0).sqrt()
        out[11] = (x == 0).sum()
        # octaves from the bits (exact on subnormals; integer ops only, which
        # inductor compiles: frexp's int32 exponent it does not)
        bits, e = _ilog2(xf)
        top = torch.where(out[8] > 0, _ilog2(out[8])[1] + 1, 0)    # abs_max < 2^top
        j = (e - top + HALF).clamp(0, HALF - 1)
        j = torch.where(xf == 0, torch.zeros_like(j), j)
        idx = torch.where(bits < 0, HALF - 1 - j, HALF + j)
        hist = torch.zeros(TM_HIST_BINS, dtype=acc, device=x.device)
        hist.scatter_add_(0, idx, finite.to(acc))
        out[12] = (top - (HALF - 1)).to(acc)
        out[13] = top.to(acc)
        out[14:] = hist
    if t.dtype == torch.float64:
        # sums that overflow a double: mean, l2 and std again from the data
        # scaled by 1 / abs_max, as tm_stats_compute's rescue does
        amax = out[8].clamp(min=torch.finfo(acc).tiny)
        xs = xf / amax
        ms = xs.sum() / denom
        rescued = torch.stack([ms * amax, (xs * xs).sum().sqrt() * amax,
                               (torch.where(finite, xs - ms, zero) ** 2).sum().div(denom).sqrt()
                               * amax])
        cols = (7, 9, 10) if level >= 2 else (7, 9)
        bad = ~torch.isfinite(torch.stack([out[c] for c in cols])).all() & finite.any()
        for i, c in enumerate(cols):        # (scalar indices: no index tensor to copy in)
            out[c] = torch.where(bad, rescued[i], out[c])
    return out
