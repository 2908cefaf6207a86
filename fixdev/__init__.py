"""fixdev: finds and fixes PyTorch device bugs (CPU/CUDA mismatches)."""

__version__ = "0.1.0"
