"""Stats of a tensor that does not live in host memory, computed on its device.

On CUDA (or any non-CPU device) the stats of ARCHITECTURE 5 are reduced with
fused torch ops whose results stay on the device; the probe stacks them and
copies them to the host once per batch, so no module call waits on a host
sync.  CPU tensors never come here: libtensormorph reads them in one pass.
The definitions follow tm_stats_compute (src/lib/stats.c): min, max, mean,
abs_max, l2 and std (population) over the finite elements; the histogram
splits [min, max], or [min - 1, max + 1] when they are equal.

The vector layout matches struct tm_rec_tensor: 12 stats (tm_stat order),
hist_lo, hist_hi, 32 histogram counts.
"""

from __future__ import annotations

import torch

from ._lib import TM_HIST_BINS, TM_STAT_COUNT

VEC_LEN = TM_STAT_COUNT + 2 + TM_HIST_BINS


def device_stats(t: torch.Tensor, level: int) -> torch.Tensor:
    """Float64 vector of VEC_LEN on t's device; nothing is synchronised."""
    x = t.detach()
    if x.is_complex():
        x = x.abs()
    acc = torch.float64 if x.device.type != "mps" else torch.float32
    x = x.reshape(-1).to(acc)
    n = x.numel()
    out = torch.zeros(VEC_LEN, dtype=acc, device=x.device)
    out[0] = n
    if n == 0:
        return out
    finite = torch.isfinite(x)
    posinf = x == float("inf")
    neginf = x == float("-inf")
    nfin = finite.sum()
    zero = torch.zeros((), dtype=acc, device=x.device)
    inf_ = torch.tensor(float("inf"), dtype=acc, device=x.device)
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
        same = mx == mn
        lo = torch.where(same, mn - 1, mn)
        hi = torch.where(same, mx + 1, mx)
        width = (hi - lo).clamp(min=torch.finfo(acc).tiny)
        idx = ((xf - lo) / width * TM_HIST_BINS).floor().clamp(0, TM_HIST_BINS - 1).long()
        hist = torch.zeros(TM_HIST_BINS, dtype=acc, device=x.device)
        hist.scatter_add_(0, idx, finite.to(acc))
        out[12] = lo
        out[13] = hi
        out[14:] = hist
    return out
