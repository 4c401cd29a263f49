"""ampdiag: numerical-stability diagnostics for mixed-precision training.

``ampdiag.torch`` traces a PyTorch training run into an ampdiag trace (docs/pytorch.md) that the
``ampdiag`` command reads (``ampdiag info``, ``compare``, ``plot``). The trace is written by
libampdiag, the C library of the ampdiag repository, loaded through ctypes (``ampdiag._lib``:
``$AMPDIAG_LIB``, the one ``pip install ./python`` built into the package, the build tree, then
the installed one).

Integrations: ``ampdiag.lightning`` (a Lightning Callback), ``ampdiag.hf`` (a Hugging Face
TrainerCallback); ``examples/pytorch/`` has an Accelerate loop.
"""
__version__ = "0.1.0"

from ._lib import AmpdiagError, LibraryNotFound, TraceWriter, library_path  # noqa: F401
