#!/usr/bin/env bash
# Source on a GPU machine without package registries: installs carried wheels (.whl/, see benchmarks/README.md) into
# /tmp/site and puts kbench's src/ on PYTHONPATH, using the machine's own torch/triton.
if ls .whl/*.whl >/dev/null 2>&1; then
  missing=$(python3 - <<'PY'
import importlib.util
print(" ".join(m for m in ("typer", "rich", "pydantic", "blake3") if importlib.util.find_spec(m) is None))
PY
)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && echo "installed carried wheels (missing before: ${missing:-none})"
  export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
# Larger packages (Ray's wheel is over the 64 MiB a call carries) travel as trimmed .tar.xz installs in .carry/.
for t in .carry/*.tar.xz; do
  [ -e "$t" ] && mkdir -p /tmp/site && tar -xJf "$t" -C /tmp/site && echo "unpacked $t"
done
case ":$PYTHONPATH:" in *:/tmp/site:*) ;; *) [ -d /tmp/site ] && export PYTHONPATH="$PYTHONPATH:/tmp/site" ;; esac
export PYTHONUNBUFFERED=1
