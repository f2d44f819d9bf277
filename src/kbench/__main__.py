"""`python -m kbench` runs the CLI (useful where the console script is not installed)."""

from kbench.launch import main

main()
