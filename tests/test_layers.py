"""The import graph runs one way (``DESIGN.md``): cli → benchmark → jobs → evaluation / export → training →
algorithms → data / env / convert → connectors → core → episodes / trusted → the plain modules
(ops, discount, scoring, config_io, ray_utils). Every ``offlinerl.*`` import, at the top of a module or
inside a function, is checked: a package may import only packages of a lower layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "offlinerl"

#: Higher imports lower, never the reverse; equal layers do not import each other.
LAYERS: dict[str, int] = {
    "ray_utils": 0, "ops": 0, "discount": 0, "scoring": 0, "config_io": 0, "progress": 0, "simulator_log": 0,
    "episodes": 1, "trusted": 1,
    "core": 2,
    "connectors": 3,
    "data": 4, "env": 4, "convert": 4,
    "algorithms": 5, "data_ops": 5,
    "training": 6,
    "evaluation": 7, "export": 7,
    "jobs": 8,
    "benchmark": 9, "api": 9,
    "cli": 10,
    "__main__": 11,
}

#: The imports that run up on purpose, each with its reason: (file, module imported).
UPWARD: dict[tuple[str, str], str] = {
    ("algorithms/algorithm_config.py", "offlinerl.api.trainer"):
        "AlgorithmConfig.build: CQLConfig(...).build(dataset), the Python API's entry point (issue 27)",
}


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("offlinerl.")]


def test_every_package_has_a_layer():
    top = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
           if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"}
    assert top == set(LAYERS), f"give new packages a layer here and in DESIGN.md: {sorted(top ^ set(LAYERS))}"


def test_imports_only_point_down():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts == ("__init__.py",):
            continue
        source = rel.parts[0].removesuffix(".py")
        for line, name in _imports(path):
            target = name.split(".")[1]
            if target != source and LAYERS[target] >= LAYERS[source] and (rel.as_posix(), name) not in UPWARD:
                wrong.append(f"src/offlinerl/{rel}:{line} imports {name} ({source} is layer {LAYERS[source]}, "
                             f"{target} is layer {LAYERS[target]})")
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(wrong)
