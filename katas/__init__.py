"""torch-katas: practise debugging PyTorch training scripts.

``from katas import check``: check a training script from Python (:func:`katas.api.check`); importing this package
imports neither torch nor the checker.
"""

from katas.api import check

__all__ = ["check", "__version__"]
__version__ = "0.1.0"
