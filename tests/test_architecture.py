"""The package's folders are its layers: no import cycles, and imports point down.

The graph is read from the source with `ast`: every ``import``/``from ... import`` of a
module of this package, at module level, in a function, or under ``TYPE_CHECKING`` (a
cycle of type-only imports is a cycle of concepts all the same). The layers, lowest first:

``core`` (errors, policies, the call) -> ``runtime`` (where tools run) -> ``text``
(everything the model reads) -> ``state`` (backends, graph state) -> ``observe`` ->
``pipeline`` (the stages) -> ``adapters`` -> the package root and its public modules.

A module may import its own layer and the layers below it, never one above. A public
module that imports nothing of the package (`checks`) stands below every layer.

Inside the pipeline, no stage imports another (the stages are read from `STAGES`; a
stage's home is its package, or its module), and from outside, the pipeline is entered
through its package only (`pipeline/__init__.py`). The exceptions the package defines
are one tree, in `core.errors`.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import langchain_resilient_tools

PKG = "langchain_resilient_tools"
ROOT = Path(langchain_resilient_tools.__file__).parent
LAYERS = ["core", "runtime", "text", "state", "observe", "pipeline", "adapters"]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                kept = here[: len(here) - node.level + 1]
                base = ".".join([*kept, node.module or ""]).rstrip(".")
            else:
                base = node.module or ""
            for alias in node.names:
                cand = f"{base}.{alias.name}"
                found.add(cand if cand in MODULES else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in MODULES and m != name and m != PKG}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int:
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    if name != PKG and not GRAPH[name]:
        return -1  # a public leaf module (checks): below every layer
    return len(LAYERS)  # the root and its public modules: on top


def test_no_import_cycles() -> None:
    done: set[str] = set()
    stack: list[str] = []

    def visit(name: str) -> None:
        if name in stack:
            cycle = [*stack[stack.index(name) :], name]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        stack.append(name)
        for dep in sorted(GRAPH[name]):
            visit(dep)
        stack.pop()
        done.add(name)

    for name in sorted(GRAPH):
        visit(name)


def test_imports_point_down() -> None:
    upward = [
        f"{name} -> {dep}"
        for name, deps in sorted(GRAPH.items())
        for dep in sorted(deps)
        if _layer(dep) > _layer(name)
    ]
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_adapter_modules_stay_small() -> None:
    for path in (ROOT / "adapters").glob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= 260, f"{path.name} has {lines} lines"


def test_the_node_is_a_toolnode_made_of_parts_not_a_ladder() -> None:
    """Issue 44: `ResilientToolNode` derives from `ToolNode` itself (its parts are
    composed: `node_calls`, `node_io`, `node_step`), and no adapter class derives from
    another of the package's classes."""
    import inspect

    from langgraph.prebuilt import ToolNode

    from langchain_resilient_tools import ResilientToolNode

    assert ResilientToolNode.__bases__ == (ToolNode,)
    for path in (ROOT / "adapters").glob("*.py"):
        module = importlib.import_module(f"{PKG}.adapters.{path.stem}")
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                ours = [b for b in cls.__mro__[1:] if b.__module__.startswith(PKG)]
                assert ours == [], f"{cls.__name__} derives from {ours}"


def test_adapters_keep_no_metadata_channel_of_their_own() -> None:
    """Issue 44: what an answer carries to the end of its step (dedup's ledger entries,
    checks' rollback wish, verify's question for a person) is a stage's mark
    (`Stage.mark_answer`), read back by the step's hooks: no adapter reads or writes a
    key of an answer's ``response_metadata`` itself."""
    import re

    reading = re.compile(r"response_metadata\s*(\[|\.)")
    found = [
        f"{path.name}:{n}"
        for path in sorted((ROOT / "adapters").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reading.search(line)
    ]
    assert not found, "adapters reading answers' metadata keys: " + ", ".join(found)


def test_every_private_module_has_a_home() -> None:
    """No flat private modules left at the root: each concern lives in its layer."""
    flat = [p.name for p in ROOT.glob("_*.py") if p.name != "__init__.py"]
    assert flat == []


def _stage_homes() -> dict[str, str]:
    """Each stage of `STAGES` by its home: the stage's package (``pipeline.repair``, for
    ``pipeline.repair.stage``) or, for a stage that is one module, that module."""
    from langchain_resilient_tools.pipeline.driver import STAGES

    homes = {}
    for cls in STAGES:
        module = cls.__module__
        package = module.rsplit(".", 1)[0]
        homes[cls.name] = package if package != f"{PKG}.pipeline" else module
    return homes


def _home_of(name: str, homes: dict[str, str]) -> str | None:
    for home in homes.values():
        if name == home or name.startswith(home + "."):
            return home
    return None


def test_no_stage_imports_another_stage() -> None:
    """What one stage tells another is a typed field (`Call`, `Env`) or a neutral module
    (`pipeline.schema`, `pipeline.shared`, `pipeline.health`): never another stage's."""
    homes = _stage_homes()
    assert len(set(homes.values())) == len(homes), homes  # one home per stage
    crossing = [
        f"{name} -> {dep}"
        for name, deps in sorted(GRAPH.items())
        if (home := _home_of(name, homes)) is not None
        for dep in sorted(deps)
        if (other := _home_of(dep, homes)) is not None and other != home
    ]
    assert not crossing, "a stage imports another stage:\n" + "\n".join(crossing)


def test_the_pipeline_is_entered_through_its_package_only() -> None:
    """Adapters (and everything else outside the pipeline) import what `pipeline`
    re-exports, never a module inside it."""
    inside = f"{PKG}.pipeline."
    reaching = [
        f"{name} -> {dep}"
        for name, deps in sorted(GRAPH.items())
        if not name.startswith(inside) and name != f"{PKG}.pipeline"
        for dep in sorted(deps)
        if dep.startswith(inside)
    ]
    assert not reaching, "imports past the pipeline's entry:\n" + "\n".join(reaching)


def test_the_pipeline_entry_exports_the_drivers_names_only() -> None:
    """The entry hands adapters the driver's names (the pipeline, its step, a call's
    outcome, a step's update), never a stage's internals behind a facade."""
    import inspect

    from langchain_resilient_tools import pipeline

    assert pipeline.__all__ == ["Outcome", "Pipeline", "Step", "StepUpdate"]
    homes = {f"{PKG}.pipeline.driver", f"{PKG}.pipeline.step"}
    public = {
        name: value
        for name, value in vars(pipeline).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(public) == set(pipeline.__all__), sorted(public)
    assert {value.__module__ for value in public.values()} <= homes


def test_every_exception_lives_in_core_errors() -> None:
    """The package's exceptions are one tree, in `core.errors`. The fault kit's
    (`testing`) are not the package's: they stand for what a service's client raises
    (`ServiceRefused`: an HTTP 429/503), and the layer must treat them as foreign."""
    import importlib

    elsewhere = []
    for name in sorted(MODULES):
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and name != f"{PKG}.core.errors"
                and not name.startswith(f"{PKG}.testing.")
            ):
                elsewhere.append(f"{name}.{attr}")
    assert not elsewhere, "exceptions outside core.errors: " + ", ".join(elsewhere)


def test_no_private_name_is_imported_from_another_module() -> None:
    """A name with a leading underscore stays in its module: what another module needs is
    public in its home (``from .envelope import content_of``, never ``_content_of``). A
    module imported under a private alias (``from . import otel as _otel``) is fine."""
    crossing = []
    for name, path in sorted(MODULES.items()):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if not node.level and not (node.module or "").startswith(PKG):
                continue  # another package's private name is that package's business
            crossing += [
                f"{name}:{node.lineno} imports {alias.name}"
                for alias in node.names
                if alias.name.startswith("_")
            ]
    assert not crossing, "private names imported across modules:\n" + "\n".join(crossing)
