"""tensormorph_probe: the PyTorch probe of tmdb (ARCHITECTURE 1, 3-6).

    probe = tensormorph_probe.attach(model, level=1, record="run.tmrun")
    ...train...
    probe.close()

Hooks observe module calls; libtensormorph (C, loaded with ctypes) numbers
the events, keeps the bounded ring with gap records and writes the .tmrun.
"""

from ._lib import LibraryNotFound
from .probe import Probe, ProbeError, active, attach, dump, evaluation, listen
from .trace import EventRecord, GapRecord, NodeRecord, TensorRecord, Trace

__version__ = "0.1.0"
__all__ = ["EventRecord", "GapRecord", "LibraryNotFound", "NodeRecord", "Probe", "ProbeError",
           "TensorRecord", "Trace", "active", "attach", "dump", "evaluation", "listen",
           "__version__"]
