"""kbench's version, in a module of its own: processes that stamp it on records import nothing else."""

VERSION = "0.1.0"
