"""The one-way layers (docs/ARCHITECTURE.md), checked on the source: a back-arrow, an import circle, a private
name taken from another module or a module over 400 lines fails here, naming the file."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tokenmath

PKG = Path(tokenmath.__file__).parent
LAYERS = ("base", "specs", "mapping", "engine", "analyses", "local", "faces")
MAX_LINES = 400


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(mod: str) -> int | None:
    parts = mod.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[str], dict[str, Path]]:
    """(module -> the package's modules it imports, private names imported across modules, module -> path)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    top = root.name
    edges: dict[str, set[str]] = {m: set() for m in files}
    private = []
    for mod, path in files.items():
        tree = ast.parse(path.read_text())
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not (target == top or target.startswith(top + ".")):
                    continue
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in files]
                if subs:
                    edges[mod].update(subs)
                if target in files and len(subs) < len(node.names):
                    edges[mod].add(target)
                    private += [f"{mod} imports {target}.{a.name}" for a in node.names
                                if a.name.startswith("_") and f"{target}.{a.name}" not in files]
            elif isinstance(node, ast.Import):
                edges[mod].update(a.name for a in node.names if a.name in files)
        edges[mod].discard(mod)
    return edges, private, files


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop(); on.discard(w); comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def problems(root: Path) -> list[str]:
    edges, private, files = import_graph(root)
    top = root.name
    out = [f"circle: {', '.join(c)}" for c in circles({m: e - {top} for m, e in edges.items()})]
    for a, targets in edges.items():
        for b in targets:
            if b == top and a != top:
                out.append(f"imports the package root: {a}")
            elif layer(a) is not None and layer(b) is not None and layer(b) > layer(a):
                out.append(f"back-arrow: {a} ({LAYERS[layer(a)]}) -> {b} ({LAYERS[layer(b)]})")
    out += [f"private name across modules: {p}" for p in private]
    for mod, path in files.items():
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            out.append(f"over {MAX_LINES} lines: {mod} ({n})")
        if mod != top and layer(mod) is None:
            out.append(f"outside the layers: {mod} (put it in one of {', '.join(LAYERS)})")
    return sorted(out)


def test_the_package_follows_its_layers():
    found = problems(PKG)
    assert not found, "\n".join(found)


def test_every_public_name_resolves():
    for name in tokenmath.__all__:
        assert getattr(tokenmath, name) is not None, name


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / "pkg" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "pkg"


@pytest.mark.parametrize("files, expect", [
    ({"__init__.py": "", "specs/__init__.py": "", "engine/__init__.py": "",
      "specs/a.py": "from pkg.engine.b import x\n", "engine/b.py": "x = 1\n"}, "back-arrow: pkg.specs.a (specs)"),
    ({"__init__.py": "", "engine/__init__.py": "",
      "engine/a.py": "from pkg.engine.b import y\nx = 1\n", "engine/b.py": "from pkg.engine.a import x\ny = 1\n"},
     "circle: pkg.engine.a, pkg.engine.b"),
    ({"__init__.py": "", "engine/__init__.py": "", "engine/a.py": "from pkg.engine.b import _hidden\n",
      "engine/b.py": "_hidden = 1\n"}, "private name across modules: pkg.engine.a imports pkg.engine.b._hidden"),
    ({"__init__.py": "", "engine/__init__.py": "", "engine/a.py": "x = 1\n" * 401}, "over 400 lines: pkg.engine.a"),
    ({"__init__.py": "", "engine/__init__.py": "", "engine/a.py": "from pkg import thing\n"},
     "imports the package root: pkg.engine.a"),
    ({"__init__.py": "", "loose.py": "x = 1\n"}, "outside the layers: pkg.loose"),
])
def test_the_check_catches_each_kind_of_problem(tmp_path, files, expect):
    found = problems(_write(tmp_path, files))
    assert any(f.startswith(expect) for f in found), found
