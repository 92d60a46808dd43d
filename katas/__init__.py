"""torch-katas: practise debugging PyTorch training scripts."""

__version__ = "0.1.0"
