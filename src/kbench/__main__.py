"""`python -m kbench` runs the CLI (useful where the console script is not installed)."""

from kbench.cli import main

main()
