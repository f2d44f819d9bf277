"""The host side of a verdict (trusted; never imports candidate code, nor kbench.worker).

`flow` plans a verdict and runs it: checks, the reference (`reference_cache`, `reference_pool`), the build
(`prebuild`), the candidate worker; `judge` and `compare` turn what the workers wrote into one status;
`verdict` makes the record; `phases` accounts for where its seconds went.
"""
