"""Fusion analysis and speed-of-light: what eager runs, what torch.compile fuses, how fast it could run."""
