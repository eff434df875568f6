"""The probe's C fast path (tensormorph_probe/_hook.c) as an optional
extension: without a compiler or Python's headers pip installs the probe
without it, and the probe runs its Python path alone (slower per call)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tensormorph_probe._hook", ["tensormorph_probe/_hook.c"],
                             optional=True)])
