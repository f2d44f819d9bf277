"""The embedded problem suite (package data): level1/, level2/, level3/ in KernelBench's layout."""
