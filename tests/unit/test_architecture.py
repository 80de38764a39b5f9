"""The layers of the package, as docs/architecture.md draws them: imports point down only,
and no module imports another that imports it back, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pgq_exporter"

# Higher imports lower, never the other way; one rank may not import another of the same.
RANKS = {
    "cli": 10,
    "http": 9,
    "bundle": 9,
    "runtime": 8,
    "sources": 7,
    "collectors": 6,
    "config": 5,
    "presets": 4,
    "queue": 3,
    "pg": 2,
    "exposition": 2,
    "labels": 2,
    "catalogue": 1,
    "sql": 1,
    "samples": 1,
    "errors": 0,
    "redaction": 0,
    "histograms": 0,
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, prefix: str) -> set[str]:
    """Every module under ``prefix`` that ``path`` imports, wherever the import is."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(prefix):
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(prefix))
    return found


def _graph(package: str = "pgq_exporter") -> dict[str, set[str]]:
    modules = {_module(p): p for p in (ROOT / package).rglob("*.py")}
    return {
        name: {m for m in _imports(path, package) if m in modules and m != name}
        for name, path in modules.items()
    }


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_is_in_a_layer() -> None:
    layers = {_layer(m) for m in _graph()} - {""}
    assert layers - {"__main__"} <= set(RANKS), sorted(layers - set(RANKS))


def test_imports_point_down_only() -> None:
    wrong = []
    for module, imported in _graph().items():
        mine = _layer(module)
        if mine in ("", "__main__"):
            continue
        for other in imported:
            theirs = _layer(other)
            if theirs and theirs != mine and RANKS[theirs] >= RANKS[mine]:
                wrong.append(f"{module} imports {other}")
    assert not wrong, "\n".join(sorted(wrong))


@pytest.mark.parametrize("package", ["pgq_exporter", "bench"])
def test_no_module_imports_itself_back(package: str) -> None:
    graph = _graph(package)
    cycles = set()

    def walk(node: str, path: list[str]) -> None:
        for nxt in graph[node]:
            if nxt in path:
                cycle = path[path.index(nxt) :]
                start = cycle.index(min(cycle))
                cycles.add(" -> ".join(cycle[start:] + cycle[:start]))
            elif nxt not in done:
                walk(nxt, [*path, nxt])
        done.add(node)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            walk(module, [module])
    assert not cycles, "\n".join(sorted(cycles))


def test_the_reference_queue_depends_on_nothing_of_the_exporter() -> None:
    allowed = ("pgq_exporter.queue", "pgq_exporter.pg", "pgq_exporter.errors", "pgq_exporter.sql")
    wrong = [
        f"{module} imports {other}"
        for module, imported in _graph().items()
        if _layer(module) == "queue"
        for other in imported
        if other != "pgq_exporter" and not other.startswith(allowed)
    ]
    assert not wrong, "\n".join(sorted(wrong))


# The kinds of a queue's layout, told apart only by the sources package.
LAYOUT_KINDS = {"SchemaMapping", "LibraryLayout", "AutoLayout", "MappedSource", "LibrarySource"}


def _kinds_asked(path: Path) -> set[str]:
    """The layout kinds ``path`` tests a value against: isinstance(x, K) or type(x) is K."""
    asked = set()
    for node in ast.walk(ast.parse(path.read_text())):
        tested: list[ast.expr] = []
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
            second = node.args[1]
            tested = list(second.elts) if isinstance(second, ast.Tuple) else [second]
        elif isinstance(node, ast.Compare) and any(isinstance(o, ast.Is) for o in node.ops):
            tested = node.comparators
        asked |= {n.id for t in tested for n in ast.walk(t) if isinstance(n, ast.Name)}
    return asked & LAYOUT_KINDS


def test_only_the_sources_tell_the_kinds_of_queue_apart() -> None:
    wrong = {
        str(path.relative_to(ROOT)): sorted(kinds)
        for path in PACKAGE.rglob("*.py")
        if "sources" not in path.relative_to(PACKAGE).parts
        for kinds in [_kinds_asked(path)]
        if kinds
    }
    assert not wrong, wrong


# A module holds one job: past this many lines it holds several.
MAX_MODULE_LINES = 500


def test_no_module_is_over_the_line_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


# The one test of the benchmarks' own code; every other test's helpers are in tests/support.
BENCH_SMOKE = ROOT / "tests/e2e/test_bench_smoke.py"


def test_no_test_imports_the_benchmarks() -> None:
    wrong = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if "node_modules" not in path.parts and path != BENCH_SMOKE and _imports(path, "bench")
    )
    assert not wrong, wrong
