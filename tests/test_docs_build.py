"""The docs build needs no data, no cache and no network (issue 11).

Before Quarto renders a page, `nbdev-proc-nbs` runs some of the notebook's cells to produce the `show_doc`
output. In nbdev 3 (`nbdev.processors._do_eval`, used by `exec_show_docs`), in every notebook that has an
exported cell or a `show_doc` call, it runs: every cell marked `#| export`, `#| exports`, `#| exporti` or
`#| exec_doc`; every code cell with an `import` anywhere in it (even inside a function or a `with` block);
every cell with a top-level `show_doc(...)` call; never a cell marked `#| eval: false`. It warns ("Found cells
containing imports and other code") only when a cell has a top-level import *and* a top-level expression or
assignment; other mixes (an import and a `for` loop) run silently.

`test_proc_nbs_without_data_cache_or_network` copies the current working tree (tracked files and untracked
files git does not ignore) to a temporary folder and runs `nbdev-proc-nbs` there, as on a fresh clone: no data
root, an empty HOME and cache, downloads pointed at a URL that does not exist, CI unset, and, where the kernel
allows it (`unshare -rn`), no network at all. `test_docs_build_runs_only_imports_and_definitions` checks the
same rule statically, with nbdev's own functions: the cells nbdev runs hold imports, definitions or show_doc only.
"""
from __future__ import annotations
import ast, json, os, re, shutil, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
NOTEBOOKS = sorted(p.name for p in NBS.glob("*.ipynb") if not p.name.startswith("_"))
MIXED = "Found cells containing imports and other code"


def working_tree_files(root: Path = ROOT) -> list[str]:
    "Tracked files and untracked files that git does not ignore, as they are on disk now (deleted ones left out)."
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                       capture_output=True, check=True)
    return sorted({f for f in r.stdout.decode().split("\0") if f and (root / f).is_file()})


def copy_working_tree(dest: Path, root: Path = ROOT) -> Path:
    "Copy the current working tree (what a fresh clone of it would hold) to `dest`."
    for f in working_tree_files(root):
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, dest / f)
    return dest


def _unshare_net() -> list[str]:
    "`unshare -rn` (a private, empty network namespace) where unprivileged user namespaces work, else nothing."
    exe = shutil.which("unshare")
    if not exe: return []
    try: ok = subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired): ok = False
    return [exe, "-rn"] if ok else []


def offline_env(work: Path, proj: Path) -> dict:
    "Environment of a fresh clone on a machine without the data and without a network."
    home = work / "home"; home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "ANNOTATED_TRANSFORMER_DATA", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "TORCH_HOME",
                        "HF_HOME", "MPLCONFIGDIR", "PYTHONPATH", "JPY_SESSION_NAME")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), MPLBACKEND="Agg", OMP_NUM_THREADS="1",
               ANNOTATED_TRANSFORMER_DATA_URL="file:///nonexistent/",   # any download attempt fails at once
               PYTHONPATH=str(proj),                                   # the copy's package, not the editable install
               PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="default")  # nbdev's warnings shown, not filtered
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        env[k] = "http://127.0.0.1:9"                                   # the discard port: refused at once
    env.pop("no_proxy", None); env.pop("NO_PROXY", None)
    if not shutil.which("quarto", path=env.get("PATH")):   # nbdev-proc-nbs only checks that Quarto is there
        stub = work / "bin"; stub.mkdir()                   # (when it is missing it tries to download it)
        (stub / "quarto").write_text("#!/bin/sh\necho 'quarto: stub for tests/test_docs_build.py' >&2\nexit 0\n")
        (stub / "quarto").chmod(0o755)
        env["PATH"] = f"{stub}{os.pathsep}{env['PATH']}"
    return env


def _plain(src: str) -> str:
    "Cell source as nbdev shows it in its warning: without `#|` directive lines."
    return "\n".join(l for l in src.splitlines() if not re.match(r"\s*#\|", l)).strip()


def mixed_cells_in_output(out: str, nbs_dir: Path) -> list[str]:
    "The cells nbdev warned about (imports mixed with code), as 'notebook cell N: first line'."
    blocks = re.findall(MIXED + r"[^\n]*\n---\n(.*?)\n---\n", out, re.S) or ["?"]
    code = {}
    for nb in sorted(nbs_dir.glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if c["cell_type"] == "code": code.setdefault(_plain("".join(c["source"])), []).append(f"{nb.name} cell {i}")
    res = set()
    for b in map(_plain, blocks):
        where = code.get(b) or [f"{nb} (first line matches)" for s, nbs in code.items()
                                if s.splitlines()[:1] == b.splitlines()[:1] for nb in nbs] or ["notebook not found"]
        res.add(f"{', '.join(where)}: {b.splitlines()[0][:80] if b else ''}")
    return sorted(res, key=lambda s: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)])


def _errors(err: str) -> str:
    "The useful part of nbdev-proc-nbs's error output: the failing cell and its error, else the traceback's end."
    lines = [l for l in err.splitlines() if l.strip()]
    at = [i for i, l in enumerate(lines) if "Error in notebook" in l or "Error in cell" in l]
    return "\n".join(lines[at[-1]:][:25] if at else lines[-12:])


@pytest.fixture(scope="module")
def proc_run(tmp_path_factory):
    """nbdev-proc-nbs in an offline copy of the working tree:
    (first run, its output and that of any reruns, project folder, {failing notebook: error}, whether netns)."""
    work = tmp_path_factory.mktemp("docs_build")
    proj = copy_working_tree(work / "proj")
    env, net = offline_env(work, proj), _unshare_net()
    exe = Path(sys.executable).parent / "nbdev-proc-nbs"
    run = lambda *a: subprocess.run([*net, str(exe), *a], cwd=proj, env=env, capture_output=True, text=True,
                                    timeout=900)
    r, failed = run("--n-workers", "2"), {}
    out = r.stdout + r.stderr
    if r.returncode:   # a failure stops the others: process the notebooks that did not come out, one by one
        for nb in NOTEBOOKS:
            if (proj / "_proc" / nb).exists(): continue
            r1 = run("--file-glob", nb, "--n-workers", "1"); out += r1.stdout + r1.stderr
            if r1.returncode: failed[nb] = _errors(r1.stderr + r1.stdout)
    return r, out, proj, failed, bool(net)


def test_proc_nbs_without_data_cache_or_network(proc_run):
    r, _, proj, failed, netns = proc_run
    print(f"nbdev-proc-nbs ran {'in an empty network namespace' if netns else 'with proxies pointed nowhere'}")
    assert "Quarto is not installed" not in r.stdout, r.stdout
    assert not failed and r.returncode == 0, (
        f"nbdev-proc-nbs failed ({r.returncode}) with no data root, no cache and no network on "
        f"{sorted(failed) or 'an unknown notebook'}: it runs exported cells, show_doc cells and every cell with an "
        "import in it, so these must not read data, download or train:\n\n"
        + ("\n\n".join(f"{nb}:\n{e}" for nb, e in failed.items()) or _errors(r.stderr + r.stdout)))
    missing = [nb for nb in NOTEBOOKS if not (proj / "_proc" / nb).exists()]
    assert not missing, f"nbdev-proc-nbs succeeded but did not write {missing} to _proc/"


def test_proc_nbs_prints_no_mixed_import_warning(proc_run):
    _, out, proj, _, _ = proc_run
    if MIXED in out:
        cells = mixed_cells_in_output(out, proj / "nbs")
        pytest.fail(f"nbdev warns about {len(cells)} cells that mix imports with other code; it runs them while it "
                    "builds the docs. Move the imports to the notebook's import cell, the code to a cell of its "
                    "own:\n  " + "\n  ".join(cells))


def _cells_nbdev_runs(nb_path: Path) -> list | None:
    "The cells `nbdev-proc-nbs` executes in this notebook, by nbdev's own rules (None if nbdev's API changed)."
    import warnings
    try:
        from nbdev.process import NBProcessor
        from nbdev.processors import _do_eval, _want_doc, _show_docs
    except ImportError: return None
    cells = NBProcessor(nb_path).nb.cells
    for i, c in enumerate(cells): c.idx_ = i
    has_docs = any(_want_doc(c) for c in cells) or _show_docs([t for c in cells for t in (c.parsed_() or [])])
    if not has_docs: return []           # exec_show_docs runs nothing in a notebook with nothing to document
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in cells if _do_eval(c)]


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_docs_build_runs_only_imports_and_definitions(nb):
    """Besides exported cells and show_doc calls, nbdev runs only cells of imports and definitions: a cell with an
    import and a loop, a `with` block or a call (even without nbdev's warning) would run at docs time too."""
    cells = _cells_nbdev_runs(NBS / nb)
    if cells is None: pytest.skip("nbdev.processors._do_eval not found: nbdev's API changed")
    shows = lambda n: isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and \
        getattr(n.value.func, "id", None) == "show_doc"
    ok = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    bad = []
    for c in cells:
        if {"export", "exports", "exporti", "exec_doc"} & set(c.directives_): continue
        trees = c.parsed_() or []
        if all(isinstance(n, ok) or shows(n) for n in trees): continue
        bad.append(f"cell {c.idx_}: {c.source.strip().splitlines()[0][:80]}")
    assert not bad, (f"{nb}: nbdev runs these cells when it builds the docs (they contain an import), so they run "
                     "with no data and no earlier state; keep imports in the import cell:\n  " + "\n  ".join(bad))


# ---- The site is built from the notebooks' saved outputs (issue 42: chapters 32 and 35 had none). ----
FIGURE_OR_TABLE = re.compile(r"^#\|\s*fig-cap|\bplt\.show\(|\bdisplay\(|\bMarkdown\(", re.M)
NOT_ON_THE_PAGE = {"export", "exports", "exporti", "hide", "slow", "notest"}   # never shown, or not run by nbdev-test
# Every chapter is held to the rule (a chapter named here would be exempt while its tables move).
MOVING: set[str] = set()


def _shown_cells(nb: str) -> list[tuple[int, str, bool]]:
    "(index, source, has outputs) of the code cells whose output the rendered page shows."
    out = []
    for i, c in enumerate(json.loads((NBS / nb).read_text(encoding="utf-8"))["cells"]):
        src = "".join(c["source"])
        directives = set(re.findall(r"^#\|\s*([\w-]+)", src, re.M))
        if c["cell_type"] != "code" or directives & NOT_ON_THE_PAGE or re.search(r"^#\|\s*eval:\s*false", src, re.M):
            continue
        out.append((i, src, bool(c.get("outputs"))))
    return out


def _prints(src: str) -> bool:
    "A top-level print(...) in a cell: text the page shows."
    try: tree = ast.parse("\n".join(l for l in src.splitlines() if not l.startswith(("#|", "%", "!"))))
    except SyntaxError: return False
    return any(isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "print"
               for n in tree.body)


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_figures_and_tables_are_saved(nb):
    "Every cell that draws a figure or shows a table has its output saved; a chapter whose cells print has outputs saved."
    cells = _shown_cells(nb)
    unsaved = [f"cell {i}: {src.strip().splitlines()[0][:80]}" for i, src, saved in cells
               if FIGURE_OR_TABLE.search(src) and not saved and nb not in MOVING]
    assert not unsaved, (f"{nb}: figures or tables without saved outputs (the site shows nothing there); run "
                         f"`nbdev-test --save nbs/{nb}` and `nbdev-clean`, which keeps outputs:\n  " + "\n  ".join(unsaved))
    printing = [i for i, src, _ in cells if _prints(src)]
    assert not printing or any(saved for _, _, saved in cells), \
        f"{nb}: cells {printing} print, but the chapter has no saved output at all (`nbdev-test --save nbs/{nb}`)"
