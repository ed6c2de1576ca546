"""The package's structure: no module of the package, and no script in tools/, imports another module's private name;
and no chapter imports a later chapter (reading order is import order)."""
import ast, json, re
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


# ---- Reading order is import order: a chapter imports only earlier chapters, or the floor (90+). ----
NBS = ROOT / "nbs"
FLOOR = 90    # 90_runtime … 94_benchmarking: the machinery, which a reader meets as an appendix


def chapter_of(nb: Path) -> int:
    "A notebook's chapter number: the two digits its name starts with."
    return int(nb.name[:2])


def notebooks(folder: Path) -> list[Path]:
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def code_cells(nb: Path) -> list[tuple[int, str]]:
    "(index, source) of every code cell: exported, shown, `#| hide`, `#| slow` alike."
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "code"]


def module_chapters(folder: Path) -> dict[str, int]:
    "Module name -> the chapter whose `#| default_exp` it is."
    out = {}
    for nb in notebooks(folder):
        for _, src in code_cells(nb):
            if m := re.search(r"^#\|\s*default_exp\s+(\S+)", src, re.M): out[m.group(1)] = chapter_of(nb)
    return out


def imported_modules(src: str) -> list[tuple[int, str]]:
    "(line, module) for each module of the package a cell imports (import, from-import, importlib)."
    lines = ["" if l.lstrip().startswith(("%", "!")) else l for l in src.splitlines()]   # IPython magics
    tree, found = ast.parse("\n".join(lines)), []
    sub = lambda name: name.split(".")[1] if name.startswith(PKG + ".") else None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, sub(a.name)) for a in node.names if sub(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == PKG: found += [(node.lineno, a.name) for a in node.names]   # from pkg import x
            elif sub(node.module): found.append((node.lineno, sub(node.module)))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            arg = node.args[0] if node.args else None                     # importlib.import_module("pkg.x")
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and sub(arg.value):
                found.append((node.lineno, sub(arg.value)))
    return found


def later_imports(folder: Path) -> list[str]:
    "Each import of a later chapter's module below the floor: 'NB cell I line L: imports M (chapter N)'."
    chapters, bad = module_chapters(folder), []
    for nb in notebooks(folder):
        here = chapter_of(nb)
        if here >= FLOOR: continue                          # the floor may import anything
        for i, src in code_cells(nb):
            for line, mod in imported_modules(src):
                there = chapters.get(mod)
                if there is not None and here < there < FLOOR:
                    bad.append(f"{nb.name} cell {i} line {line}: imports {mod} (chapter {there})")
    return bad


def test_every_chapter_is_seen():
    chapters = module_chapters(NBS)
    assert {"encoder_decoder", "evaluation", "fast_model", "pretrained", "cli"} <= set(chapters)
    assert chapters["cli"] >= FLOOR > chapters["fast_decoding"]


def test_a_chapter_imports_only_earlier_chapters_or_the_floor():
    "Reading order is import order: what a chapter runs, the reader has met (the floor, 90+, aside)."
    bad = later_imports(NBS)
    assert not bad, ("a chapter imports a later chapter's module: move the code, or let the caller pass it in "
                     "(an argument or a hook), as the command line passes the fast twins:\n  " + "\n  ".join(bad))


def test_the_order_check_finds_a_planted_import(tmp_path):
    def nb(name, *cells):
        doc = {"cells": [{"cell_type": "code", "source": c.splitlines(keepends=True), "metadata": {}, "outputs": [],
                          "execution_count": None} for c in cells] + [{"cell_type": "markdown", "metadata": {},
                          "source": ["from annotated_transformer.late import x"]}],      # prose is not an import
               "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        (tmp_path / name).write_text(json.dumps(doc), encoding="utf-8")
    nb("03_early.ipynb", "#| default_exp early", "#| hide\n%time 1\nimport annotated_transformer.late as l",
       "#| slow\nfrom annotated_transformer import late, floor\nfrom annotated_transformer.mid import y",
       "importlib.import_module('annotated_transformer.late')")
    nb("05_mid.ipynb", "#| default_exp mid",
       "from annotated_transformer.early import f\nfrom annotated_transformer.floor import g")   # earlier, floor: fine
    nb("07_late.ipynb", "#| default_exp late")
    nb("91_floor.ipynb", "#| default_exp floor", "from annotated_transformer.late import x")     # the floor: anything
    assert later_imports(tmp_path) == [
        "03_early.ipynb cell 1 line 3: imports late (chapter 7)",
        "03_early.ipynb cell 2 line 2: imports late (chapter 7)",
        "03_early.ipynb cell 2 line 3: imports mid (chapter 5)",
        "03_early.ipynb cell 3 line 1: imports late (chapter 7)"]
