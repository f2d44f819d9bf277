"""A backend is one registered class: the settings, the static checks, the prompts, `kbench env` and the
service's schema take everything about it from there, and another package adds one by entry point."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import kbench.backends as registry
from kbench.backends import Backend, backend_names, default_backend, get_backend, register_backend
from kbench.checks import kernel_names, run_checks
from kbench.cli import app
from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.problems import get_problem
from kbench.prompts.builder import PromptOptions, backend_title, build_prompt

SOURCE = """
import torch
from toyc import kernel

@kernel
def add_kernel(x, y):
    return x + y

class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return add_kernel(x, y)
"""


class ToyBackend(Backend):
    title = "Toy"
    prompt_title = "Toy (a test's)"
    code_names = ("toyc",)
    missing_kernel = "no @toyc.kernel function"

    def find_kernels(self, ctx: Any) -> list[str]:
        return [
            node.name
            for node in ctx.nodes
            if isinstance(node, ast.FunctionDef)
            and any(ctx.qualname(d) == "toyc.kernel" for d in node.decorator_list)
        ]

    def version(self) -> str | None:
        return "0.1"


@pytest.fixture
def toy() -> Iterator[Backend]:
    register_backend("toy")(ToyBackend)
    try:
        yield get_backend("toy")
    finally:
        registry._REGISTRY.pop("toy", None)


def test_a_registered_backend_is_a_setting_and_a_request_field(toy: Backend) -> None:
    from kbench.serve.wire import SubmitRequest

    assert RunConfig(backend="toy").backend == "toy"
    assert SubmitRequest(problem="2/1", source="x", backend="toy").backend == "toy"
    schema = SubmitRequest.model_json_schema()["properties"]["backend"]
    assert "toy" in json.dumps(schema)
    with pytest.raises(ValidationError, match="unknown backend 'rust'; choose one of: .*toy"):
        RunConfig(backend="rust")


def test_the_static_checks_use_its_kernel_finder(toy: Backend) -> None:
    assert kernel_names(SOURCE, "toy") == ("add_kernel",)
    assert "no-kernel" not in {f.rule for f in run_checks(SOURCE, "toy", "fp32").findings}
    bare = SOURCE.replace("@kernel\n", "")
    hit = [f for f in run_checks(bare, "toy", "fp32").findings if f.rule == "no-kernel"]
    assert hit and hit[0].message == "backend toy: no @toyc.kernel function"
    # a source of this backend handed in as another: the hint names it by its title
    other = [f for f in run_checks(SOURCE, "cpp", "fp32").findings if f.rule == "no-kernel"]
    assert other and other[0].message.endswith("this looks like a Toy candidate: pass --backend toy")


def test_prompts_and_env_name_it_by_its_title(toy: Backend) -> None:
    assert backend_title("toy") == "Toy (a test's)"
    assert backend_title("cpp") == "C++ (CPU)" and backend_title("triton") == "Triton"
    info = json.loads(CliRunner().invoke(app, ["env", "--format", "json"]).output)
    assert info["backends"]["toy"]["version"] == "0.1" and info["backends"]["toy"]["runs"]


def test_the_defaults_come_from_the_backends() -> None:
    assert default_backend(gpu=True) == "cuda" and default_backend(gpu=False) == "cpp"
    assert RunConfig().backend == "cuda"
    # Triton's and the DSL over it (the helion plugin) compile through Triton
    assert {b.name for b in registry.backends() if b.triton_kernels} == {"helion", "triton"}


def test_a_plugin_registers_through_its_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[str] = []

    class Point:
        name, value = "toy2", "toyplugin"

        def load(self) -> None:
            loaded.append(self.name)
            register_backend("toy2")(ToyBackend)

    class Broken(Point):
        name, value = "broken", "missing.module"

        def load(self) -> None:
            raise ImportError("No module named 'missing'")

    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [Point(), Broken()])
    monkeypatch.setattr(registry, "_loaded", {"builtin"})
    try:
        get_backend("cpp")  # a built-in name reads no entry point
        assert loaded == []
        with pytest.warns(UserWarning, match="backend plugin 'broken'.*failed to load"):
            assert get_backend("toy2").name == "toy2"  # an unknown name does
        assert "toy2" in backend_names() and loaded == ["toy2"]
    finally:
        registry._REGISTRY.pop("toy2", None)
    with pytest.raises(ConfigError, match="unknown backend 'toy2'"):
        get_backend("toy2")


def test_the_shipped_plugins_register_without_installed_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """kbench run from a source tree on PYTHONPATH has no entry points: its own plugin backends (cute,
    helion, tilelang) still register, by name (GPU machines without a package index run it so)."""
    import importlib.metadata
    import sys

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    monkeypatch.setattr(registry, "_loaded", {"builtin"})
    for name in registry.SHIPPED_PLUGINS:
        monkeypatch.delitem(registry._REGISTRY, name)
        monkeypatch.delitem(sys.modules, f"kbench.backends.{name}")
        monkeypatch.setattr(registry, name, getattr(registry, name))  # the package's attribute comes back too
    assert get_backend("cute").name == "cute"
    assert set(registry.SHIPPED_PLUGINS) <= set(backend_names())


def test_a_shipped_plugin_whose_entry_point_fails_is_not_imported_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Installed metadata that names a shipped plugin decides: its failure is a warning, as for any plugin,
    and the by-name fallback does not import it a second time (which would raise where it warned)."""
    import importlib.metadata
    import sys

    class Broken:
        name, value = "cute", "kbench.backends.cute"

        def load(self) -> None:
            raise ImportError("broken on this machine")

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [Broken()])
    monkeypatch.setattr(registry, "_loaded", {"builtin"})
    monkeypatch.delitem(registry._REGISTRY, "cute")
    monkeypatch.delitem(sys.modules, "kbench.backends.cute")
    monkeypatch.setattr(registry, "cute", registry.cute)
    with pytest.warns(UserWarning, match="backend plugin 'cute'.*broken on this machine"):
        names = backend_names()
    assert "cute" not in names and {"helion", "tilelang"} <= set(names)


def test_its_prompt_text_comes_from_its_own_package(
    toy: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "toyprompts"
    (package / "templates" / "backends").mkdir(parents=True)
    (package / "examples" / "toy").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "templates" / "backends" / "toy.md").write_text("Write @toyc.kernel functions.")
    (package / "examples" / "toy" / "add.py").write_text("# the toy's add example\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(type(toy), "prompt_package", "toyprompts")
    prompt = build_prompt(get_problem("2/1"), PromptOptions(backend="toy", shots="one"))
    assert "Write @toyc.kernel functions." in prompt.text
    assert "# the toy's add example" in prompt.text and "Toy (a test's)" in prompt.text
