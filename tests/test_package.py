"The package installs (not editable) and imports from another directory; the CLI answers --version and --help; every import is a declared dependency; README.md links the website."
import subprocess, sys, os
from pathlib import Path
import annotated_transformer

ROOT = Path(__file__).resolve().parents[1]


def run(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def test_non_editable_install_imports_from_elsewhere(tmp_path):
    target = tmp_path / "site"
    r = run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target), str(ROOT))
    assert r.returncode == 0, r.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    r = run(sys.executable, "-c", "import annotated_transformer as a; print(a.__file__, a.__version__)", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert str(target) in r.stdout and annotated_transformer.__version__ in r.stdout
    r = run(sys.executable, "-m", "annotated_transformer", "--version", cwd=tmp_path, env=env)
    assert r.returncode == 0 and annotated_transformer.__version__ in r.stdout


def test_console_script_version_and_help():
    exe = Path(sys.executable).parent / "annotated-transformer"
    r = run(str(exe), "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"annotated-transformer {annotated_transformer.__version__}"
    r = run(str(exe), "--help")
    assert r.returncode == 0 and "usage: annotated-transformer" in r.stdout


def test_the_cli_imports_the_chapters_and_no_chapter_imports_the_cli():
    "One direction only: the command line (cli.py and its commands' modules, cli_*.py) imports the chapters (real "
    "imports, no dispatch by string: cli.py imports a command's module in a function); no chapter imports the CLI."
    import re
    pkg = Path(annotated_transformer.__file__).parent
    cli = {f.name: f.read_text(encoding="utf-8") for f in pkg.glob("cli*.py")}
    assert set(cli) >= {"cli.py", "cli_train.py", "cli_translate.py", "cli_lab.py", "cli_tools.py"}
    for name, src in cli.items(): assert "importlib" not in src and "import_module" not in src, name
    for mod in ("cli_train", "cli_translate", "cli_lab", "cli_tools"):                 # in `_training` and the rest
        assert re.search(rf"^    from annotated_transformer\.{mod} import SUBCOMMANDS$", cli["cli.py"], re.M), mod
    commands = "\n".join(src for name, src in cli.items() if name != "cli.py")
    for mod in ("copy_task", "multi30k", "model_variations", "attention_maps", "benchmarking", "ctranslate2_export"):
        assert re.search(rf"^from (\.|annotated_transformer\.){mod} import", commands, re.M), mod
    for f in pkg.glob("*.py"):
        if f.name in (*cli, "__main__.py", "_modidx.py"): continue
        assert not re.search(r"from \.cli|annotated_transformer\.cli", f.read_text(encoding="utf-8")), f.name


# ---- A plain `pip install .` must be enough: every import the package makes is declared. ----
import ast, re, tomllib
from importlib.metadata import packages_distributions

PKG = ROOT / "annotated_transformer"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _dist_name(requirement):
    "'spacy>=3.7,<4' -> 'spacy'; names compared normalized (PEP 503)."
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9._-]+)", requirement).group(1)).lower()


def _imports(tree, lazy):
    "(top-level name, line) of each absolute import; `lazy`: also those inside functions (else only what runs at import)."
    todo = list(tree.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not lazy: continue
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test): continue
        if isinstance(n, ast.Import): yield from ((a.name.split(".")[0], n.lineno) for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.level == 0: yield n.module.split(".")[0], n.lineno
        todo.extend(ast.iter_child_nodes(n))


def _undeclared(allowed, lazy):
    "'file:line: import X (distribution D)' for each import of a module no distribution in `allowed` provides."
    provides = packages_distributions()
    bad = []
    for f in sorted(PKG.glob("*.py")):
        for top, line in _imports(ast.parse(f.read_text(encoding="utf-8")), lazy):
            if top in sys.stdlib_module_names or top == "annotated_transformer": continue
            # Not installed here (an extra without a wheel for this platform): assume the distribution has the module's name.
            dists = {_dist_name(d) for d in provides.get(top, [])} or {_dist_name(top)}
            if not dists & allowed: bad.append(f"{f.name}:{line}: import {top} (distribution {', '.join(sorted(dists))})")
    return sorted(set(bad))


def test_every_module_imports_with_the_runtime_dependencies_only():
    "What runs at import time (every module, the CLI included) needs only [project].dependencies: `pip install .` starts the CLI."
    runtime = {_dist_name(d) for d in PYPROJECT["project"]["dependencies"]}
    assert not (bad := _undeclared(runtime, lazy=False)), f"not in [project].dependencies of pyproject.toml: {bad}"


def test_every_lazy_import_is_a_runtime_dependency_or_an_extra():
    "Imports inside functions may come from an optional extra (ctranslate2, tensorboard), never from [dev] alone."
    extras = PYPROJECT["project"]["optional-dependencies"]
    allowed = {_dist_name(d) for k, ds in extras.items() if k != "dev" for d in ds} | \
              {_dist_name(d) for d in PYPROJECT["project"]["dependencies"]}
    assert not (bad := _undeclared(allowed, lazy=True)), f"neither a dependency nor in a user extra of pyproject.toml: {bad}"


# ---- README.md is read on the repository's front page: its links must lead somewhere from there. ----
def test_readme_links_chapters_on_the_website_not_relatively():
    "A relative `page.html` link works on the website, not on GitHub; README.md links each chapter on the website, and each such page exists."
    site = PYPROJECT["project"]["urls"]["Documentation"].rstrip("/") + "/"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r'\]\(([^)\s]+)|href="([^"]+)"', readme)
    targets = [a or b for a, b in targets]
    relative = [t for t in targets if ".html" in t and not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|#", t)]
    assert not relative, f"README.md has relative links (dead on GitHub; edit nbs/index.ipynb or tools/readme.py): {relative}"
    # The website's pages: index.html and one per notebook, named without its number (nbs/16_multi30k.ipynb -> multi30k.html).
    pages = {re.sub(r"^\d+_", "", p.stem) + ".html" for p in (ROOT / "nbs").glob("*.ipynb")}
    missing = [t for t in targets if t.startswith(site) and t[len(site):].split("#")[0] not in pages | {""}]
    assert not missing, f"README.md links pages the website does not have: {missing}"


def test_the_book_names_no_ci_data_folder():
    "Readers have no ../shared folder: their data root is the cache or a folder of their own (issue: chapter 16 named it)."
    import re
    root = Path(__file__).resolve().parents[1]
    bad = re.compile(r"\.\./shared|shared/data")
    hits = []
    for f in [*sorted((root / "nbs").glob("*.ipynb")), root / "README.md", *sorted((root / "annotated_transformer").glob("*.py"))]:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if bad.search(line): hits.append(f"{f.relative_to(root)}:{i}: {line.strip()[:120]}")
    assert not hits, hits

# --- the machinery reads like the chapters (CONTRIBUTING.md, "The rules the structural tests enforce") -----------
import tokenize, io

PAGE_WIDTH = 110    # the rendered book shows about 100 characters of a code line; nothing exported runs past 110

def _modules():
    return [p for p in sorted((ROOT / "annotated_transformer").glob("*.py")) if p.name != "_modidx.py"]

def _generated_lines(tree: ast.Module) -> set[int]:
    "Lines nbdev writes itself and the book never shows as code: the module docstring (the page's summary), `__all__`."
    first = tree.body[:1] if tree.body and isinstance(tree.body[0], ast.Expr) else []
    alls = [n for n in tree.body if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets)]
    return {i for n in first + alls for i in range(n.lineno, n.end_lineno + 1)}

def test_exported_lines_fit_the_page():
    long = []
    for p in _modules():
        text = p.read_text(encoding="utf-8")
        skip = _generated_lines(ast.parse(text))
        long += [f"{p.name}:{i}: {len(l)} characters" for i, l in enumerate(text.splitlines(), 1)
                 if len(l) > PAGE_WIDTH and i not in skip]
    assert not long, f"{len(long)} exported lines over {PAGE_WIDTH} characters (wrap them in the notebook):\n" + "\n".join(long[:40])

def test_no_statements_chained_with_semicolons():
    chained = [f"{p.name}:{t.start[0]}" for p in _modules()
               for t in tokenize.generate_tokens(io.StringIO(p.read_text(encoding="utf-8")).readline)
               if t.type == tokenize.OP and t.string == ";"]
    assert not chained, "statements chained with ';' (one statement per line):\n" + "\n".join(chained)

def _rebindings(tree: ast.Module, name: str) -> list[str]:
    "Assignments that switch behaviour by rebinding state: a class or module attribute set at module level, a module-level dict"
    " item set at module level, or any attribute of an imported module set anywhere."
    modules = {a.asname or a.name.split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               for a in n.names if isinstance(n, ast.Import) or n.module is None}
    def targets(n): return n.targets if isinstance(n, ast.Assign) else [n.target]
    def base(t):
        while isinstance(t, (ast.Attribute, ast.Subscript)): t = t.value
        return t.id if isinstance(t, ast.Name) else None
    out = []
    for n in tree.body:                                     # module level
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            out += [f"{name}:{n.lineno}" for t in targets(n) if isinstance(t, (ast.Attribute, ast.Subscript))]
    for n in ast.walk(tree):                                # anywhere: another module's attribute
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            out += [f"{name}:{n.lineno}" for t in targets(n)
                    if isinstance(t, (ast.Attribute, ast.Subscript)) and base(t) in modules]
    return sorted(set(out))

def test_no_switch_by_rebinding_module_or_class_state():
    found = [x for p in _modules() for x in _rebindings(ast.parse(p.read_text(encoding="utf-8")), p.name)]
    assert not found, ("behaviour switched by rebinding a class/module attribute or a module-level dict "
                       "(use an argument, an options object, or @patch):\n" + "\n".join(found))

def test_the_rebinding_check_finds_what_it_should():
    src = "import x\nfrom . import decoding\nclass A: pass\nA.f = len\nD = {}\nD['k'] = 1\n" \
          "def g():\n    decoding._SPEED['a'] = False\n    decoding.search = None\n    y = {}\n    y['a'] = 1\n"
    test = _rebindings(ast.parse(src), "m.py")
    assert test == ["m.py:4", "m.py:6", "m.py:8", "m.py:9"], test


def test_one_file_writer_and_one_folder_writer():
    "What others read is written whole by the runtime's `atomic_file` or `write_folder_atomically`: no module but the"
    " runtime renames a temporary file or folder into place (issue 42: six writers, with different safety)."
    import re
    pattern = re.compile(r"\bos\.(replace|rename)\(|tempfile\.mk[sd]temp\(|\.with_suffix\([^)]*\.tmp")
    hits = [f"{p.name}:{i}: {l.strip()}" for p in _modules() if p.name != "runtime.py"
            for i, l in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(l)]
    assert not hits, "a writer of its own (use runtime.atomic_file or runtime.write_folder_atomically):\n" + "\n".join(hits)


def test_every_document_the_tests_and_tools_cite_is_in_the_repository():
    "A test or tool that cites a document (CONTRIBUTING.md, README.md, ...) cites one a clone has (issue 42: a style guide no clone had)."
    import re
    cited = {(f.relative_to(ROOT), m) for f in [*sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "tools").glob("*.py"))]
             for m in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", f.read_text(encoding="utf-8"))}
    missing = sorted(f"{f}: {m}" for f, m in cited if not any(ROOT.glob(f"**/{m}")))
    assert not missing, missing
    assert (ROOT / "CONTRIBUTING.md").is_file()
