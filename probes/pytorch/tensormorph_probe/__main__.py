"""python -m tensormorph_probe: the same as the tensormorph-probe command."""

import sys

from .cli import main

sys.exit(main())
