"""Code that runs in worker processes, next to untrusted candidate code; the host never imports it
(an import-linter contract in pyproject.toml). Entry points, started by module name from the host
(sandbox/host.py) or the warm starter (sandbox/zygote.py): `candidate` and `reference`."""
