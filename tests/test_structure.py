"The package's structure: no module of the package, and no script in tools/, imports another module's private name."
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = "annotated_transformer"
FILES = sorted([*(ROOT / PKG).glob("*.py"), *(ROOT / "tools").glob("*.py")])


def private(name: str) -> bool:
    "A leading underscore, but not a dunder such as __version__."
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def ours(node: ast.ImportFrom) -> bool:
    "An import from this package: relative, or from annotated_transformer[.x]."
    return node.level > 0 or node.module == PKG or (node.module or "").startswith(PKG + ".")


def private_imports(path: Path) -> list[str]:
    "Every private name `path` takes from another module of the package: imported, or read as an attribute."
    tree, found, modules = ast.parse(path.read_text(encoding="utf-8"), str(path)), [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and ours(node):
            for a in node.names:
                if private(a.name): found.append(f"{path.name}:{node.lineno} from {'.' * node.level}{node.module or ''} import {a.name}")
                elif node.module in (None, PKG): modules.add(a.asname or a.name)     # from . import training
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.asname and a.name.startswith(PKG + ".")}  # import x.y as z
    for node in ast.walk(tree):                                                    # training._x, z._x
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and private(node.attr):
            found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_the_files_are_found():
    assert {"cli.py", "runtime.py", "benchmarking.py"} <= {p.name for p in FILES}
    assert any(p.parent.name == "tools" for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_private_name_is_imported_across_modules(path):
    assert private_imports(path) == [], "import the public name, or make it public where it is defined"


def test_the_check_sees_each_form(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from .training import _LogitsModel\nfrom annotated_transformer.runtime import _x as y\n"
                   "from annotated_transformer import training\ntraining._private\n"
                   "from . import __version__\nfrom .runtime import hardware_summary\nimport os\nos._exit\n")
    assert [f.split(" ", 1)[1] for f in private_imports(bad)] == [
        "from .training import _LogitsModel", "from annotated_transformer.runtime import _x", "training._private"]
