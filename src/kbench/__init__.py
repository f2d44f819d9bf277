"""kbench: a trusted benchmark and toolkit for fused GPU kernels written by language models."""

__version__ = "0.1.0"
