"""The house rules, read from the source with ``ast`` (standard library; import-linter would add
a dependency and a config language for four rules, and would not check the package links):

- one importable namespace: each door's top-level folder is the subpackage ``engram.<door>``
  through a relative symlink, and no module imports a door by its bare folder name;
- the core (``engram/``) imports no door, and no door imports the composition root
  (``engram.cli``);
- no import cycle between modules, counting imports inside functions (a lazy import still ties
  the two modules together), not counting ``if TYPE_CHECKING:`` blocks.

Today's picture is `python -m tests.test_layers`: the arrows between folders and the largest
modules.
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOORS = ("api", "tasks", "agents", "watcher", "cli")
ROOT = "cli"
"""The composition root: it builds the services and may import every door."""


def source_files() -> dict[str, Path]:
    """Every module of the namespace by its dotted name, read from the real folders."""
    modules: dict[str, Path] = {}
    for folder in ("engram", *DOORS):
        base = REPO / folder
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts or any(
                p.is_symlink() for p in _parents_within(path, base)
            ):
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            prefix = ["engram"] if folder == "engram" else ["engram", folder]
            modules[".".join(prefix + parts)] = path
    return modules


def _parents_within(path: Path, base: Path) -> Iterator[Path]:
    current = path.parent
    while current != base and base in current.parents:
        yield current
        current = current.parent


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Dotted names ``module`` imports (``from a import b`` gives ``a.b``, which the caller
    resolves to ``a`` when ``b`` is not a module), with their line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".")
                if not is_package:
                    package.pop()
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the namespace's modules it imports; and every import of a bare door name."""
    modules = source_files()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    bare: list[str] = []
    for name, path in modules.items():
        for target, line in imported_names(name, path):
            head = target.split(".")[0]
            if head in DOORS:
                bare.append(f"{path.relative_to(REPO)}:{line} imports {target}")
                continue
            if head != "engram":
                continue
            resolved = target if target in modules else target.rsplit(".", 1)[0]
            if resolved in modules and resolved != name:
                graph[name].add(resolved)
    return graph, bare


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in DOORS else "core"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_each_door_is_a_subpackage_of_the_one_namespace() -> None:
    for door in DOORS:
        link = REPO / "engram" / door
        assert link.is_symlink() and os.readlink(link) == f"../{door}", (
            f"engram/{door} must be the relative symlink ../{door}"
        )
        assert (link / "__init__.py").is_file()
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'include = ["engram*"]' in pyproject  # one top-level package in the wheel


def test_no_module_imports_a_door_by_its_bare_name() -> None:
    _, bare = import_graph()
    assert bare == [], "import the door as engram.<door>:\n" + "\n".join(bare)


def test_the_core_imports_no_door_and_no_door_imports_the_root() -> None:
    graph, _ = import_graph()
    wrong = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if (layer(source) == "core" and layer(target) != "core")
        or (layer(source) not in ("core", ROOT) and layer(target) == ROOT)
    )
    assert wrong == [], (
        "the core imports no door; only engram.cli imports engram.cli:\n" + "\n".join(wrong)
    )


def test_no_import_cycles() -> None:
    graph, _ = import_graph()
    assert cycles(graph) == []


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The checks themselves: a cycle is found, a relative import resolves, TYPE_CHECKING
    imports do not count."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    path = tmp_path / "mod.py"
    path.write_text(
        "from typing import TYPE_CHECKING\nfrom . import x\nfrom ..y import z\n"
        "if TYPE_CHECKING:\n    import engram.api\n"
        "def f():\n    import engram.tasks.app\n"
    )
    names = [n for n, _ in imported_names("engram.pkg.mod", path)]
    assert "engram.pkg.x" in names and "engram.y.z" in names
    assert "engram.tasks.app" in names and "engram.api" not in names
    assert layer("engram.cli.main") == "cli" and layer("engram.store") == "core"


def picture() -> str:
    """Arrows between folders (how many module imports each), the largest modules."""
    graph, _ = import_graph()
    arrows = Counter(
        (layer(s), layer(t))
        for s, targets in graph.items()
        for t in targets
        if layer(s) != layer(t)
    )
    lines = ["arrows between folders (module imports):"]
    lines += [f"  {a} -> {b}: {n}" for (a, b), n in sorted(arrows.items())]
    lines.append(f"cycles: {cycles(graph) or 'none'}")
    sizes = sorted(
        ((sum(1 for _ in p.open()), n) for n, p in source_files().items()), reverse=True
    )[:10]
    lines.append("largest modules (lines): " + ", ".join(f"{n} {c}" for c, n in sizes))
    return "\n".join(lines)


if __name__ == "__main__":
    print(picture())


CLIENTS = ("bench",)
"""Core packages that play a client: ``engram bench`` sends observe bodies in a host's shape
(Claude Code's hook names), as that host's adapter would."""


def _core_strings() -> dict[str, set[str]]:
    """Every string constant of each core module, as ``hook_key`` spells names."""
    from engram.compress import hook_key

    found: dict[str, set[str]] = {}
    for name, path in source_files().items():
        if name.split(".")[1:2] and name.split(".")[1] in DOORS + CLIENTS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found[name] = {
            hook_key(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
    return found


def test_the_core_names_no_host_hook() -> None:
    """Adapters send what an event is (``eventKind``); the core knows no host's hook names. A
    name that is also a generic word for an event kind (``SessionStart`` ~ session_start, a
    ``Notification``, a ``stop``) is not a host's own."""
    from engram.agents import registry
    from engram.compress import hook_key
    from engram.wire import EVENT_KINDS

    generic = {hook_key(k) for k in EVENT_KINDS} | {"stop"}
    host_names: dict[str, str] = {}
    for host in registry.with_hooks():
        if host == "raw":  # the generic adapter's names are the event kinds themselves
            continue
        for hook in registry.load(host).EVENTS:
            if hook_key(hook) not in generic:
                host_names[hook_key(hook)] = f"{host} {hook}"
    assert len(host_names) > 20  # the check has something to find
    named = {
        module: sorted(host_names[s] for s in strings if s in host_names)
        for module, strings in _core_strings().items()
    }
    assert {m: n for m, n in named.items() if n} == {}
