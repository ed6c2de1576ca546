"""Words that match the code: every backticked name in the book resolves.

Read: the markdown cells of every notebook, the docstrings and comments of its code cells (exported or not), and
CONTRIBUTING.md. A backticked span is checked when it looks like a name:

- an identifier or dotted name (`beam_search`, `SearchOptions.beam_size`, `F.scaled_dot_product_attention`):
  a function, class, method, field or attribute of the package; a name of torch, Python or a declared dependency;
  a subcommand of the command line; a key of a results file (`nbs/results/*.json`); an upper-case name the code
  spells in a string (an environment variable, a metavariable); else a name the chapter's own code uses;
- a call (`greedy_decode(model, src, max_len=...)`): the callable resolves and takes every keyword given;
- a keyword (`use_cache=False`, `n_best=...`): a parameter of a callable named in the same sentence (of any
  function of the package or torch when the sentence names none);
- a flag or a command (`--beam-size`, `annotated-transformer translate --n-best 3`, `torchrun --standalone`):
  the parser has the subcommand, and the flag belongs to it (to some subcommand when none is named);
- a path (`nbs/results/x.json`, `tools/same_results.py`, `model.bin`): a file or folder of the repository, a path
  that .gitignore names (what a run or a build writes: `checkpoints/`, `web/dist/`), or a file name that the
  package or tools/ spell (a string, an f-string pattern); a script of an experiment that is over may be gone if
  its sentence names the commit it ran at. Paths outside the repository (`/proc/...`, `~/...`) are the reader's
  machine's and are not checked; placeholders stand for any name (`NAME`, `<split>`, `*`).

Other spans are code that the reader types or reads (an expression, a shape `(batch, len)`, a number, a string, a
formula, another program's command line): only the calls inside them whose callable resolves are checked.

Claims that span a sentence are checked too:
- "`f` takes `x`" / "`f`'s `x`": x is a parameter of f, or a field or attribute of class f;
- a hand-written chapter beside a package name ("chapter 14's `decode_corpus`", "`KVCache` (chapter 22)",
  "`x` of chapter 6"): that chapter's notebook (its `#| default_exp`) defines the name;
- any "chapter N" in the prose, comments or docstrings: a notebook is numbered N.
nbdev's doclinks turn the same names into links to the page that defines them; a test checks that they do.

What cannot resolve and is still right goes on `ALLOWLIST`, with its reason. Cells are numbered from 0, as in the
notebook's JSON. `python tests/test_prose_names.py [FILE ...]` prints the findings of every notebook (or those named).
"""
from __future__ import annotations

import argparse, ast, builtins, importlib, importlib.util, inspect, io, json, keyword, re, subprocess, sys, tokenize
from collections.abc import Container
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
PKG = "annotated_transformer"
DOCS = [ROOT / "CONTRIBUTING.md"]   # markdown files checked besides the notebooks

# Spans that cannot resolve and are right, as written (without backticks) -> why.
ALLOWLIST: dict[str, str] = {
    "sha256sum": "the coreutils program that checks a SHA256SUMS file",
    "cd": "the shell's command, in a step the reader types",
    "pooch": "the download library that chapter 13 explains it does not use",
    "requests": "the HTTP library that `pooch` would bring along (chapter 13)",
    "model.bin": "the weights file of a CTranslate2 model folder, written by CTranslate2's converter",
    "history.png": "the loss plot that `write_history` draws beside the run's history.csv",
    "maps-cross.png": "what `attention --output maps.png` writes for the cross-attention (FILE's stem-KIND.suffix)",
    "maps-encoder.png": "... and for the encoder's self-attention",
    "early_stopping=True": "Hugging Face's `generate` keyword, which chapter 14 compares with ours (not a dependency)",
    "--max-step": "the abbreviation of `--max-steps` that `_Parser` refuses (its docstring's example)",
    "window.atTranslate": "the JavaScript global that the web page of chapter 35 defines (web/src)",
    "sgemm": "the BLAS routine (single-precision matrix product) that a profile names",
}
# Folders of the reader's own that the book's walkthroughs name (not the repository's, not written by the package).
READER_FOLDERS: dict[str, str] = {
    "mydata/": "the reader's own corpus in chapter 33's walkthrough",
}

# Short names the book's cells import modules as.
ALIASES = {"nn": "torch.nn", "F": "torch.nn.functional", "np": "numpy", "optim": "torch.optim",
           "dist": "torch.distributed", "mp": "torch.multiprocessing", "plt": "matplotlib.pyplot",
           "ct2": "ctranslate2", "ort": "onnxruntime"}
# Namespaces whose members a bare name may be (`LambdaLR`, `DistributedDataParallel`, `no_grad`, `fsync`).
NAMESPACES = ("torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.optim.lr_scheduler",
              "torch.utils.data", "torch.distributed", "torch.nn.parallel", "torch.amp", "torch.backends",
              "torch.multiprocessing", "torch.profiler", "torch.onnx", "torch.nn.utils", "torch.testing",
              "fastcore.test", "fastcore.docments", "fastcore.script", "fastcore.basics", "fastcore.meta",
              "nbdev.showdoc", "nbdev.doclinks", "sacrebleu", "sacrebleu.metrics", "tokenizers", "tokenizers.models",
              "safetensors.torch", "ctranslate2", "ctranslate2.specs", "ctranslate2.specs.common_spec",
              "onnxruntime", "os", "sys", "pathlib", "shutil", "signal", "json", "tempfile", "subprocess",
              "dataclasses", "functools", "itertools",
              "contextlib", "math", "time", "random", "gzip", "hashlib", "argparse", "platform", "platformdirs")
# Classes whose members a dotted name on a variable may reach (`model.eval`, `scheduler.step`, `x.shape`).
MEMBER_CLASSES = ("torch.Tensor", "torch.nn.Module", "torch.optim.Optimizer", "torch.optim.lr_scheduler.LRScheduler",
                  "torch.nn.Transformer", "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
                  "torch.nn.MultiheadAttention", "torch.nn.parallel.DistributedDataParallel", "torch.nn.Linear",
                  "torch.utils.data.DataLoader", "torch.Generator", "pathlib.Path", "argparse.ArgumentParser",
                  "argparse.Namespace", "dict", "list", "str", "tuple", "set", "ctranslate2.Translator")
PLACEHOLDERS = ("XXXXXXXX", "NAME", "PREFIX", "FOLDER", "DIR", "GPU", "SRC", "TGT", "LANG", "STEM", "OUTPUT", "NN",
                "TOPIC", "FILE")   # words a path or a file name stands in for (`nbs/NN_TOPIC.ipynb`)
FILE_EXTS = {"py", "json", "jsonl", "ipynb", "md", "yml", "yaml", "toml", "txt", "css", "js", "sh", "gz", "pt",
             "bin", "onnx", "csv", "png", "svg", "html", "tmp", "partial", "lock", "tsv", "safetensors", "cfg",
             "mjs", "wasm", "ts", "tar", "zip", "model", "log", "en", "de", "fr"}
# Programs whose command lines are the reader's to type; only ours and torchrun's flags are checked.
OTHER_PROGRAMS = {"python", "python3", "pip", "pytest", "bash", "sh", "npm", "npx", "node", "git", "cd", "export",
                  "sacrebleu", "sha256sum", "nbdev-test", "nbdev-export", "nbdev-clean", "nbdev-docs", "quarto",
                  "nbdev-prepare", "nbdev-proc-nbs", "ct2-opennmt-py-converter", "huggingface-cli", "taskset",
                  "numactl", "perf", "lscpu", "nproc", "cat", "ls", "gzip", "curl", "wget", "tensorboard"}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
NAME = re.compile(rf"{IDENT}(\.{IDENT})*")
FLAG = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*")
KEYWORD = re.compile(rf"({IDENT})=(.*)")
CAPS = re.compile(r"[A-Z][A-Z0-9_]*")
NO_FILE = "no such file or folder"


# ---------------------------------------------------------------------------------------------------------------
# Reading the book: sentences and their backticked spans

def code_spans(md: str) -> list[tuple[int, int, str]]:
    "CommonMark inline code: (start, end, content) for each run of backticks closed by a run of the same length."
    out, i = [], 0
    while (m := re.compile(r"`+").search(md, i)):
        n, j = len(m[0]), m.end()
        close = re.compile(r"(?<!`)`{%d}(?!`)" % n).search(md, j)
        if not close: i = j; continue
        body = md[j:close.start()].replace("\n", " ")
        if body.startswith(" ") and body.endswith(" ") and body.strip(): body = body[1:-1]
        out.append((m.start(), close.end(), body))
        i = close.end()
    return out


def without_fences(md: str) -> str:
    "Markdown with fenced code blocks and indented HTML comments blanked (lines kept)."
    out, fence = [], None
    for line in md.split("\n"):
        s = line.lstrip()
        if fence is None and (m := re.match(r"(`{3,}|~{3,})", s)): fence = m[1]; out.append(""); continue
        if fence is not None:
            if s.startswith(fence) and not s[len(fence):].strip(): fence = None
            out.append(""); continue
        out.append(line)
    return re.sub(r"<!--.*?-->", "", "\n".join(out), flags=re.S)


@dataclass
class Sentence:
    "A sentence with each code span replaced by `\\x00k\\x00`, and the spans' contents."
    masked: str
    spans: list[str]

    def text(self) -> str: return re.sub(r"\x00(\d+)\x00", lambda m: f"`{self.spans[int(m[1])]}`", self.masked)


def sentences(text: str) -> list[Sentence]:
    "The sentences of a prose text that hold code spans (a sentence ends at . ! ? before a capital, a blank line, "
    "a list item or a table cell)."
    text = without_fences(text)
    spans = code_spans(text)
    masked, last = [], 0
    for k, (a, b, _) in enumerate(spans):
        masked += [text[last:a], f"\x00{k}\x00"]
        last = b
    masked = "".join(masked) + text[last:]
    out = []
    for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(\x00\"*_\[$])|\n\s*\n|\n\s*(?:[-*+>#]|\d+\.)\s|\|", masked):
        ks = [int(k) for k in re.findall(r"\x00(\d+)\x00", s)]
        if ks:
            renum = {k: i for i, k in enumerate(ks)}
            out.append(Sentence(re.sub(r"\x00(\d+)\x00", lambda m: f"\x00{renum[int(m[1])]}\x00", s),
                                [spans[k][2] for k in ks]))
    return out


def comments_and_docstrings(src: str) -> list[str]:
    "The comments (not `#|` directives) and docstrings of a code cell, each a text."
    src = "\n".join("" if l.lstrip().startswith(("!", "%")) else l for l in src.split("\n"))
    out = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            if t.type == tokenize.COMMENT and not t.string.startswith("#|"): out.append(t.string[1:])
    except (tokenize.TokenError, IndentationError, SyntaxError): pass
    try: tree = ast.parse(src)
    except SyntaxError: return out
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if (d := ast.get_docstring(node, clean=False)): out.append(d)
    return out


def cells(nb: Path) -> list[dict]:
    return json.loads(nb.read_text(encoding="utf-8"))["cells"]


def source(c: dict) -> str: return "".join(c["source"]) if isinstance(c["source"], list) else c["source"]


def prose_of(path: Path) -> list[tuple[str, str]]:
    "(where, text) for each piece of prose of a notebook (its cells) or a markdown file (its paragraphs)."
    if path.suffix == ".md":
        text, out, line = path.read_text(encoding="utf-8"), [], 1
        for para in re.split(r"(\n\s*\n)", text):
            if para.strip(): out.append((f"{path.name} line {line}", para))
            line += para.count("\n")
        return out
    out = []
    for i, c in enumerate(cells(path)):
        if c["cell_type"] == "markdown": out.append((f"{path.name} cell {i}", source(c)))
        elif c["cell_type"] == "code" and "`" in source(c):
            out += [(f"{path.name} cell {i}", t) for t in comments_and_docstrings(source(c))]
    return out


def identifiers(src: str) -> set[str]:
    "Every identifier a piece of Python uses or defines, and the identifiers inside its short string literals."
    src = "\n".join("" if l.lstrip().startswith(("!", "%")) else l for l in src.split("\n"))
    try: tree = ast.parse(src)
    except SyntaxError: return set(re.findall(IDENT, src))
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name): out.add(n.id)
        elif isinstance(n, ast.Attribute): out.add(n.attr)
        elif isinstance(n, ast.arg): out.add(n.arg)
        elif isinstance(n, ast.keyword) and n.arg: out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): out.add(n.name)
        elif isinstance(n, ast.alias): out.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 80:
            out |= set(re.findall(rf"(?<![\w.-]){IDENT}(?![\w-])", n.value))
    return out


class LocalNames:
    "The names a chapter's own code uses (its variables, the keys it reads): what its prose may name. "
    "Read when first asked."
    def __init__(self, path: Path): self.path, self.names = path, None

    def __contains__(self, name) -> bool:
        if self.names is None:
            p = self.path
            self.names = identifiers("\n".join(source(c) for c in cells(p) if c["cell_type"] == "code")) \
                if p.suffix == ".ipynb" and p.exists() else set()
        return name in self.names


def string_patterns(tree: ast.AST) -> tuple[set[str], list[re.Pattern]]:
    "The string literals of a module, and its f-strings as patterns (`f\"maps-{kind}.png\"` -> maps-.+\\.png)."
    strings, patterns = set(), []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str): strings.add(n.value)
        elif isinstance(n, ast.JoinedStr):   # kept when it spells more than an extension: not f"{stem}.gz"
            fixed = "".join(v.value for v in n.values if isinstance(v, ast.Constant))
            if len(re.findall(r"\w", re.sub(r"\.\w+$", "", fixed))) >= 3:
                patterns.append(re.compile("".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".+"
                                                   for v in n.values)))
    return strings, patterns


def json_keys(x, out: set) -> set:
    if isinstance(x, dict):
        for k, v in x.items(): out.add(str(k)); json_keys(v, out)
    elif isinstance(x, list):
        for v in x: json_keys(v, out)
    return out


@cache
def try_import(name: str):
    try: return importlib.import_module(name)
    except Exception: return None


def declared_dependencies() -> set[str]:
    "The import names of pyproject.toml's dependencies and extras (`pypandoc_binary` -> pypandoc)."
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
        project = tomllib.loads(text)["project"]
        reqs = [*project["dependencies"], *(r for rs in project.get("optional-dependencies", {}).values() for r in rs)]
    except ImportError:   # Python 3.10: the quoted strings of the two tables' lists
        lists = re.findall(r"^(?:dependencies|[\w-]+)\s*=\s*\[(.*?)\]\s*(?:#.*)?$", text, re.M | re.S)
        reqs = re.findall(r'"([^"]+)"', "\n".join(lists))
    names = set()
    for r in reqs:
        n = re.match(r"[A-Za-z0-9_.\-]+", r)[0].lower().replace("-", "_")
        names |= {n, n.removesuffix("_binary"), n.replace("pytest_", "")}
    return names


# ---------------------------------------------------------------------------------------------------------------
# What a name may resolve to

class Book:
    "The package, its command line and its repository: what a name in the prose may resolve to."

    def __init__(self):
        from annotated_transformer import _modidx
        self.syms = _modidx.d["syms"]
        mods = [m for m in self.syms if m not in (PKG, f"{PKG}.__main__")]
        self.modules, self.broken = {}, {}   # module name -> module; -> why it does not import
        for m in mods:
            try: self.modules[m.split(".", 1)[1]] = importlib.import_module(m)
            except Exception as e: self.broken[m] = f"{type(e).__name__}: {e}"
        sources = {k: Path(m.__file__).read_text(encoding="utf-8") for k, m in self.modules.items()}
        self.notebook_of = {}          # module -> notebook that exports it
        for nb in sorted(NBS.glob("*.ipynb")):
            if (m := re.search(r"#\|\s*default_exp\s+([\w.]+)", nb.read_text(encoding="utf-8"))):
                self.notebook_of[m[1]] = nb.name
        self.defined_in = {}           # "beam_search", "KVCache.update", "PAD_IDX" -> modules that define it
        for mod, syms in self.syms.items():
            for q in syms: self.defined_in.setdefault(q[len(mod) + 1:], set()).add(mod.removeprefix(PKG + "."))
        self.top = {}                  # top-level name -> the objects of that name in package modules
        self.self_attrs = {}           # class name -> names its methods assign on self
        self.params, self.members = set(), set()
        trees = {mod: ast.parse(src) for mod, src in sources.items()}
        for mod, tree in trees.items():
            for node in tree.body:
                names = []
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                        names += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)): names.append(node.name)
                for n in names:
                    self.defined_in.setdefault(n, set()).add(mod)
                    if hasattr(self.modules[mod], n): self.top.setdefault(n, []).append(getattr(self.modules[mod], n))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.self_attrs.setdefault(node.name, set()).update(
                        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                        and isinstance(n.value, ast.Name) and n.value.id == "self")
                    self.self_attrs[node.name] |= {   # buffers and parameters registered by name
                        n.args[0].value for n in ast.walk(node) if isinstance(n, ast.Call) and n.args
                        and getattr(n.func, "attr", "") in ("register_buffer", "register_parameter")
                        and isinstance(n.args[0], ast.Constant)}
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    self.params |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store): self.members.add(node.attr)
        self.fields = set()            # the fields of the package's dataclasses (keywords of their constructors)
        for objs in self.top.values():
            for o in objs:
                if inspect.isclass(o): self.members |= self.members_of(o) - set(dir(object))
                if is_dataclass(o): self.fields |= {f.name for f in fields(o)}
        self.members |= {a for s in self.self_attrs.values() for a in s}
        self.parser, self.commands = self.build_parser()
        self.flags_of = {c: {o for a in p._actions for o in a.option_strings} for c, p in self.commands.items()}
        self.flags_of[None] = {o for a in self.parser._actions for o in a.option_strings}
        self.dests = {a.dest for p in self.commands.values() for a in p._actions}
        self.torchrun_flags = self.torchrun_parser_flags()
        self.files = self.repo_files()
        self.strings, self.patterns = set(), []   # what the package and tools/ spell in strings
        tools = [ast.parse(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "tools").glob("*.py"))]
        for tree in [*trees.values(), *tools]:
            s, p = string_patterns(tree)
            self.strings |= s
            self.patterns += p
        self.caps = {w for s in self.strings for w in re.findall(r"(?<![\w$])[A-Z][A-Z0-9_]+(?![\w])", s)}
        for p in (ROOT / "tests").glob("*.py"):   # the variables the tests set or read: `CI`
            self.caps |= set(re.findall(r"(?<=[\"'])[A-Z][A-Z0-9_]+(?=[\"'=])", p.read_text(encoding="utf-8")))
        self.caps |= {a.metavar for p in self.commands.values() for a in p._actions if isinstance(a.metavar, str)}
        self.result_keys = set()
        for p in sorted((NBS / "results").glob("*.json")):
            try: json_keys(json.loads(p.read_text(encoding="utf-8")), self.result_keys)
            except ValueError: pass
        self.dependencies = declared_dependencies()
        self.namespaces = [m for n in NAMESPACES if (m := try_import(n)) is not None]
        self.external_members = set()
        for c in MEMBER_CLASSES:
            if (o := self.resolve_external(c)) is None: continue
            self.external_members |= set(dir(o))
            try: self.external_members |= set(inspect.signature(o).parameters)
            except (TypeError, ValueError): pass
        self.external_members |= self.ctranslate2_spec_names()
        self._ignored, self._external_params = {}, None

    # -- building blocks ------------------------------------------------------------------------------------------

    @staticmethod
    def build_parser():
        "The command line's parser, built as `main` builds it, and each subcommand's parser by name."
        from annotated_transformer import cli
        p = cli.build_parser()
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return p, dict(sub.choices)

    @staticmethod
    def torchrun_parser_flags() -> set[str]:
        try:
            from torch.distributed.run import get_args_parser
            return {o for a in get_args_parser()._actions for o in a.option_strings}
        except Exception: return set()

    @staticmethod
    def ctranslate2_spec_names() -> set[str]:
        "The attribute names of CTranslate2's Transformer spec (the tree chapter 34 maps our weights onto)."
        try:
            from ctranslate2.specs import TransformerSpec
            spec = TransformerSpec.from_config(1, 1)
        except Exception: return set()
        names, todo = set(), [spec]
        while todo:
            o = todo.pop()
            for k, v in vars(o).items():
                names.add(k)
                for x in (v if isinstance(v, list) else [v]):
                    if hasattr(x, "__dict__") and type(x).__module__.startswith("ctranslate2"): todo.append(x)
        return names

    @staticmethod
    def repo_files() -> set[str]:
        "The repository's files and folders (tracked, or new and not ignored), relative to its root; folders end in /."
        try:
            out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout.split("\n")
        except (OSError, subprocess.CalledProcessError):
            out = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
        files = {f for f in out if f and (ROOT / f).exists()}
        return files | {"/".join(Path(f).parts[:k]) + "/" for f in files for k in range(1, len(Path(f).parts))}

    def ignored(self, path: str) -> bool:
        "Whether .gitignore names the path (a checkpoint, a run, a build's output)."
        if path not in self._ignored:
            try:
                r = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, capture_output=True)
                self._ignored[path] = r.returncode == 0
            except OSError: self._ignored[path] = False
        return self._ignored[path]

    def members_of(self, obj) -> set[str]:
        "What `obj.x` may name: attributes, dataclass fields, annotations, and what its methods assign on self."
        out = set(dir(obj))
        if is_dataclass(obj): out |= {f.name for f in fields(obj)}
        if inspect.isclass(obj):
            for c in obj.__mro__:
                out |= self.self_attrs.get(c.__name__, set()) | set(getattr(c, "__annotations__", {}))
        return out

    def resolve_external(self, dotted: str):
        "A name of torch, Python or a dependency (`nn.Transformer`, `os.environ`, `ValueError`): the object, or None."
        parts = dotted.split(".")
        head = ALIASES.get(parts[0], parts[0])
        if head == PKG or head in self.modules and head not in sys.stdlib_module_names: return None
        if hasattr(builtins, head):
            obj = getattr(builtins, head)
            for p in parts[1:]:
                if (obj := getattr(obj, p, None)) is None: return None
            return obj
        if not self.declared(head.split(".")[0]): return None
        obj, path = try_import(head), head
        if obj is None: return None
        for p in parts[1:]:
            nxt = getattr(obj, p, None)
            if nxt is None and inspect.ismodule(obj): nxt = try_import(f"{path}.{p}")
            if nxt is None: return None
            obj, path = nxt, f"{path}.{p}"
        return obj

    def declared(self, module: str) -> bool:
        "A top-level module of Python or of a declared dependency (`sys`, `torch`, `sacrebleu`; not `requests`)."
        return module in sys.stdlib_module_names or module.lower() in self.dependencies

    def package_objects(self, dotted: str) -> list:
        "The package's objects a dotted name names (several where modules define the same name; None for a field)."
        parts = dotted.split(".")
        if parts[0] == PKG:
            if len(parts) == 1: return [importlib.import_module(PKG)]
            if parts[1] not in self.modules: return []
            roots, parts = [self.modules[parts[1]]], parts[2:]
        elif parts[0] in self.top: roots, parts = list(self.top[parts[0]]), parts[1:]
        elif parts[0] in self.modules: roots, parts = [self.modules[parts[0]]], parts[1:]
        else: return []
        out = []
        for obj in roots:
            for i, p in enumerate(parts):
                if hasattr(obj, p): obj = getattr(obj, p)
                elif i == len(parts) - 1 and p in self.members_of(obj): obj = None   # a field: nothing to go on
                else: break
            else: out.append(obj)
        return out

    def modules_defining(self, dotted: str) -> set[str]:
        "The package modules that define a name (`beam_search`, `KVCache.update`, `runtime.atomic_file`)."
        parts = dotted.split(".")
        if parts[0] == PKG: parts = parts[1:]
        if parts and parts[0] in self.modules and parts[0] not in self.top and len(parts) > 1:
            parts = parts[1:]
        for k in (2, 1):
            if len(parts) >= k and ".".join(parts[:k]) in self.defined_in: return self.defined_in[".".join(parts[:k])]
        return set()

    def is_package_name(self, dotted: str) -> bool:
        return bool(self.package_objects(dotted))

    def callables(self, dotted: str) -> list:
        "The callables a name names: the package's, else torch's, Python's or a dependency's, else a bare method."
        objs = [o for o in self.package_objects(dotted) if callable(o)]
        if not objs and (o := self.resolve_external(dotted)) is not None and callable(o): objs = [o]
        if not objs and "." not in dotted:
            objs = [getattr(o, dotted) for os_ in self.top.values() for o in os_
                    if inspect.isclass(o) and callable(getattr(o, dotted, None))]
            objs = objs or [getattr(ns, dotted) for ns in self.namespaces if callable(getattr(ns, dotted, None))]
        return objs

    @staticmethod
    def parameters(obj) -> set[str] | None:
        "The keywords a callable takes (a class's: its constructor's, its `forward`'s and its classmethods'); "
        "None when it takes any (**kwargs) or is opaque."
        out, more = set(), []
        if inspect.isclass(obj):
            more = [getattr(obj, n) for n, v in vars(obj).items() if isinstance(v, classmethod) or n == "forward"]
        for f in [obj, *more]:
            try: ps = inspect.signature(f).parameters
            except (TypeError, ValueError): return None
            if any(p.kind == p.VAR_KEYWORD for p in ps.values()): return None
            out |= {n for n, p in ps.items() if p.kind != p.VAR_POSITIONAL}
        return out

    def external_parameters(self) -> set[str]:
        "The keywords of the callables in NAMESPACES (`weights_only` of `torch.load`)."
        if self._external_params is None:
            self._external_params = set()
            for ns in self.namespaces:
                for n in dir(ns):
                    if n.startswith("_") or not callable(o := getattr(ns, n, None)): continue
                    try: self._external_params |= set(inspect.signature(o).parameters)
                    except (TypeError, ValueError): pass
        return self._external_params

    # -- one span -------------------------------------------------------------------------------------------------

    def check_name(self, name: str, local: Container[str]) -> str | None:
        "None if an identifier or a dotted name resolves, else why not."
        parts = name.split(".")
        if self.package_objects(name): return None
        if parts[0] in self.top or parts[0] in self.modules or parts[0] == PKG:
            if len(parts) == 1: return None
            if not (parts[0] in self.modules and parts[0] in local):   # `optimizer.step()`: a variable
                return f"the package has no `{parts[-1]}` on `{'.'.join(parts[:-1])}`"
        elif self.resolve_external(name) is not None: return None
        elif len(parts) == 1:
            if keyword.iskeyword(name) or any(hasattr(ns, name) for ns in self.namespaces): return None
            if self.declared(name): return None
            if name in self.params or name in self.members or name in self.commands or name in self.dests: return None
            if name in self.external_members or name in self.result_keys or name in local: return None
            if CAPS.fullmatch(name) and name in self.caps or name in self.strings: return None
            return ("not a name of the package, its command line, torch, Python or a dependency, "
                    "nor a key of a results file or a name this chapter's code uses")
        else:
            head = ALIASES.get(parts[0], parts[0])
            if head in sys.stdlib_module_names or try_import(head.split(".")[0]) is not None:
                return f"`{head}` has no `{'.'.join(parts[1:])}`"
        # a variable and its attributes: `model.encoder.norm`, `scheduler.step`, `x.shape`
        if parts[0] not in local and (why := self.check_name(parts[0], local)): return why
        bad = [p for p in parts[1:] if p not in self.members and p not in self.external_members
               and p not in self.params and p not in local]
        return f"no class of the package or of torch has a member `{bad[0]}`" if bad else None

    def check_keywords(self, name: str, keywords: list[str]) -> str | None:
        "None if some callable of this name takes every keyword given, else why not."
        objs, why = self.callables(name), None
        for o in objs:
            ps = self.parameters(o)
            if ps is None: return None
            if not (bad := [k for k in keywords if k not in ps]): return None
            why = f"`{name}` has no parameter `{bad[0]}` (it takes: {', '.join(sorted(ps)) or 'nothing'})"
        return why

    def check_path(self, t: str) -> str | None:
        "None if a path is the repository's, one .gitignore names, or a file name the package or tools/ spell."
        if t.startswith(("/", "~", "$")) or "://" in t: return None        # the reader's machine, or a URL
        bare = t.rstrip("/")
        if any(t.startswith(f) for f in READER_FOLDERS): return None
        if bare in self.files or bare + "/" in self.files: return None
        rx = re.escape(bare)
        for ph in PLACEHOLDERS:   # a folder may stand for several levels
            rx = re.sub(rf"(?<![A-Za-z]){ph}(?![A-Za-z])", r".+" if ph in ("FOLDER", "DIR", "PREFIX") else r"[^/]+", rx)
        rx = re.compile(re.sub(r"\\\*|…|\\\.\\\.\\\.|<[^>]*>", r"[^/]*", rx) + "/?")
        if any(rx.fullmatch(f) for f in self.files): return None
        if "/" not in bare and any(rx.fullmatch(f.rstrip("/").rsplit("/", 1)[-1]) for f in self.files): return None
        if self.ignored(bare) or self.ignored(bare + "/"): return None
        fixed = re.split(r"<|\*|…|\.\.\.|" + "|".join(PLACEHOLDERS), bare)[0]
        if "/" in fixed.strip("/") and any(fixed in s for s in self.strings): return None   # a path the code spells
        if re.search(r"<|\*|…|" + "|".join(PLACEHOLDERS), bare) and "/" not in bare:   # a pattern of names:
            words = re.findall(r"[A-Za-z0-9_-]{2,}", re.sub(r"<[^>]*>|" + "|".join(PLACEHOLDERS), " ", bare))
            if words and all(any(w in s for s in self.strings) for w in words): return None   # its parts, spelled
        folder, _, base = bare.rpartition("/")
        if (not folder or folder + "/" in self.files or self.ignored(folder)) and \
                (base in self.strings or any(p.fullmatch(base) for p in self.patterns)): return None
        return NO_FILE + " in the repository (nor one that .gitignore names, or the package writes)"

    @staticmethod
    def in_named_commit(path: str, sentence: str) -> bool:
        "A file of an experiment that is over: the sentence names the commit it ran at, and the file is there (or "
        "the commit is not in this clone, a shallow one)."
        for c in re.findall(r"\b[0-9a-f]{7,40}\b", sentence):
            try:
                known = subprocess.run(["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=ROOT, capture_output=True)
                if known.returncode: return True
                if not subprocess.run(["git", "cat-file", "-e", f"{c}:{path.rstrip('/')}"], cwd=ROOT,
                                      capture_output=True).returncode: return True
            except OSError: return True
        return False

    def check_command(self, t: str) -> str | None:
        "A command line: ours (`annotated-transformer translate --n-best 3`) or torchrun's. None if its flags exist."
        words = t.split()
        if words[0] == "torchrun":
            end = next((i for i, w in enumerate(words) if w in ("-m", "--module") or w.endswith(".py")), len(words))
            bad = [w for w in words[1:end] if w.startswith("--") and w.split("=")[0] not in self.torchrun_flags]
            if bad: return f"torchrun has no flag `{bad[0].split('=')[0]}`"
            if end < len(words) - 1 and words[end + 1] == PKG:
                return self.check_command(" ".join(words[end + 2:]) or "…")
            return None
        if words[0] in ("annotated-transformer", PKG): words = words[1:]
        sub = None
        for i, w in enumerate(words):
            w = w.split("=")[0]
            if FLAG.fullmatch(w):
                ok = (self.flags_of[sub] if sub else set().union(*self.flags_of.values())) | self.flags_of[None]
                if w not in ok: return f"`{sub or 'annotated-transformer'}` has no flag `{w}`"
            elif sub is None and not w.startswith("-") and (i == 0 or not FLAG.fullmatch(words[i - 1])):
                if w in self.commands: sub = w
                elif not (CAPS.fullmatch(w) or w in ("…", "...")):
                    return f"the command line has no subcommand `{w}` (it has: {', '.join(self.commands)})"
        return None

    def check_span(self, text: str, local: Container[str]) -> str | None:
        "None if a backticked span resolves (or is code that is not checked), else why not."
        t = text.strip()
        if t in ALLOWLIST or not t: return None
        words = t.split()
        if m := re.search(r"(?:^|\s)-m annotated_transformer\b", t): t, words = t[m.end():].strip() or "…", None
        if words is None or words[0] in ("annotated-transformer", "torchrun") or FLAG.match(words[0]) or \
                (words[0] in self.commands and len(words) > 1 and words[1].startswith("-")):
            return self.check_command(t)
        if words[0] in OTHER_PROGRAMS and len(words) > 1:
            if words[0] in ("python", "python3", "bash") and len(words) > 1 and words[1].endswith((".py", ".sh")):
                return self.check_path(words[1])
            return None
        if re.fullmatch(r"\.\w+", t): return None                             # an extension: `.py`
        if re.fullmatch(r"[\w.\-/~<>*…]+", t) and ("/" in t or t.rsplit(".", 1)[-1] in FILE_EXTS) \
                and not (NAME.fullmatch(t) and not self.check_name(t, local)):
            return self.check_path(t)
        if NAME.fullmatch(t) and "." in t and all(CAPS.fullmatch(p) for p in t.split(".")):
            return self.check_path(t)                                          # `PREFIX.LANG`
        if NAME.fullmatch(t): return self.check_name(t, local)
        if (m := KEYWORD.fullmatch(t)) and not m[2].startswith("="): return None   # checked with its sentence
        try: tree = ast.parse(t, mode="eval").body
        except SyntaxError: return None
        if (chain := self.chain(tree)) and not isinstance(tree, ast.Name): return self.check_name(chain, local)
        if isinstance(tree, ast.Call) and (f := self.chain(tree.func)):
            if (why := self.check_name(f, local)): return why
            return self.check_keywords(f, [k.arg for k in tree.keywords if k.arg])
        for n in ast.walk(tree):   # calls inside an expression: the keywords of those that resolve
            if isinstance(n, ast.Call) and (f := self.chain(n.func)) and self.is_package_name(f):
                if (why := self.check_keywords(f, [k.arg for k in n.keywords if k.arg])): return why
        return None

    @staticmethod
    def chain(node) -> str | None:
        "`a.b[0].c` as 'a.b.c'; None unless the node is names, attributes and subscripts."
        parts = []
        while True:
            if isinstance(node, ast.Name): parts.append(node.id); break
            if isinstance(node, ast.Attribute): parts.append(node.attr); node = node.value
            elif isinstance(node, ast.Subscript): node = node.value
            else: return None
        return ".".join(reversed(parts))

    def span_name(self, text: str) -> str | None:
        "The dotted name a span is about: `decode_corpus`, `decode_corpus(n_best=...)`, `KVCache.update` -> the name."
        t = text.strip().removesuffix("'s")
        if NAME.fullmatch(t): return t
        try: tree = ast.parse(t, mode="eval").body
        except SyntaxError: return None
        return self.chain(tree.func if isinstance(tree, ast.Call) else tree)

    # -- one sentence ---------------------------------------------------------------------------------------------

    def chapter_of(self, name: str) -> set[int]:
        "The chapters (notebook numbers) whose modules define a package name."
        nbs = {self.notebook_of.get(m, "") for m in self.modules_defining(name)}
        return {int(n[:2]) for n in nbs if n[:2].isdigit()}

    def check_sentence(self, s: Sentence, local: Container[str]) -> list[tuple[str, str]]:
        "(span, why) for each span of a sentence that does not resolve, and each claim of it that is false."
        out = [(x, why) for x in s.spans if (why := self.check_span(x, local))
               and not (why.startswith(NO_FILE) and self.in_named_commit(x, s.masked))]
        named = [n for x in s.spans if not KEYWORD.fullmatch(x.strip()) and (n := self.span_name(x))
                 and self.is_package_name(n) and self.callables(n)]
        for x in s.spans:   # a keyword: of the package's callables the sentence names, else of any callable
            if not (m := KEYWORD.fullmatch(x.strip())) or m[2].startswith("=") or x.strip() in ALLOWLIST: continue
            if CAPS.fullmatch(m[1]):                  # VAR=value: an environment variable
                if m[1] not in self.caps: out.append((x, f"`{m[1]}` is not a variable the code or tests read"))
            elif named:
                if not any(self.check_keywords(n, [m[1]]) is None for n in named):
                    names = ", ".join(f"`{n}`" for n in dict.fromkeys(named))
                    out.append((x, f"`{m[1]}` is not a parameter of {names}"))
            elif not any(m[1] in x for x in (self.params, self.fields, self.dests, local, self.external_members,
                                             self.external_parameters())):
                out.append((x, f"`{m[1]}` is not a parameter of a function of the package, torch or Python"))
        claim = r"\x00(\d+)\x00(?:'s)?\s+(?:takes|accepts|has)(?:\s+(?:an?|the|its|a\s+new))?" \
                r"(?:\s+(?:keyword|optional|parameter|argument|field|option))*s?\s+\x00(\d+)\x00"
        for m in re.finditer(claim + r"|\x00(\d+)\x00's\s+\x00(\d+)\x00", s.masked):
            a, b = (m[1], m[2]) if m[1] else (m[3], m[4])
            owner, x = self.span_name(s.spans[int(a)]), s.spans[int(b)].strip()
            attr = KEYWORD.fullmatch(x)[1] if KEYWORD.fullmatch(x) else x
            if not (owner and NAME.fullmatch(attr) and "." not in attr and self.is_package_name(owner)): continue
            has = set()
            for o in self.package_objects(owner):
                if o is None: continue
                has |= (self.parameters(o) or {attr}) if callable(o) else set()
                has |= self.members_of(o) if inspect.isclass(o) else set()
            if has and attr not in has and x not in {y for y, _ in out}:
                out.append((x, f"`{owner}` has no parameter or field `{attr}`"))
        for chapter, k in self.chapter_claims(s):    # "chapter 14's `decode_corpus`", "`KVCache` (chapter 22)"
            name = self.span_name(s.spans[k])
            if not name or not self.is_package_name(name) or not (where := self.chapter_of(name)): continue
            if chapter not in where:
                out.append((s.spans[k], f"is in chapter {' and '.join(map(str, sorted(where)))}, "
                                        f"not chapter {chapter}"))
        return out

    @staticmethod
    def chapter_claims(s: Sentence) -> list[tuple[int, int]]:
        "(chapter, span index) for each chapter written beside a span: N's `x`, `x` (chapter N), `x` of chapter N."
        out = []
        for m in re.finditer(r"[Cc]hapter\s+(\d{1,2})'s\s+\x00(\d+)\x00", s.masked): out.append((int(m[1]), int(m[2])))
        for m in re.finditer(r"\x00(\d+)\x00(?:'s)?\s*\((?:in\s+|from\s+|see\s+)?[Cc]hapter\s+(\d{1,2})\b|"
                             r"\x00(\d+)\x00\s+(?:of|from)\s+[Cc]hapter\s+(\d{1,2})\b", s.masked):
            out.append((int(m[2]), int(m[1])) if m[1] else (int(m[4]), int(m[3])))
        return out


@cache
def book() -> Book: return Book()


CHAPTERS = re.compile(r"\b[Cc]hapters?\s+(\d{1,2}\b(?:\s*(?:,|and|or|to|–|-)\s*\d{1,2}\b)*)")


def missing_chapters(text: str) -> list[int]:
    "The chapters a text names ('chapter 30', 'chapters 12 and 16') that no notebook is numbered as."
    numbers = {int(n) for m in CHAPTERS.finditer(without_fences(text)) for n in re.findall(r"\d+", m[1])}
    return sorted(n for n in numbers if not list(NBS.glob(f"{n:02d}_*.ipynb")))


def findings(path: Path, b: Book | None = None, prose: list[tuple[str, str]] | None = None) -> list[str]:
    "Every unresolved name and false claim of a notebook or markdown file, as 'where: `name` — why'."
    b, local = b or book(), LocalNames(path)
    out = []
    for where, text in prose if prose is not None else prose_of(path):
        out += [f"{where}: chapter {n} — no notebook is numbered {n:02d}" for n in missing_chapters(text)]
        for s in sentences(text):
            out += [f"{where}: `{x}` — {why}" for x, why in b.check_sentence(s, local)]
    return out


def book_files() -> list[Path]:
    return sorted(NBS.glob("*.ipynb")) + DOCS


# ---------------------------------------------------------------------------------------------------------------
# The tests

def test_every_backticked_name_resolves():
    pytest.importorskip("ctranslate2")   # the dev extra: chapter 34 names CTranslate2's spec
    assert not book().broken, f"modules that do not import: {book().broken}"
    bad = [f for path in book_files() for f in findings(path)]
    assert not bad, (f"{len(bad)} backticked names do not match the code (fix the prose, or add a reviewed "
                     f"entry to ALLOWLIST in {Path(__file__).name}):\n" + "\n".join(bad))


def planted(text: str, nb: str) -> list[str]:
    "The findings of one markdown text planted into a notebook of the book (its code's names in scope)."
    return findings(NBS / nb, prose=[(f"{nb} cell planted", text)])


def test_a_keyword_the_function_lacks_fails():
    assert planted("A sentence about `greedy_decode(use_cache=False)`.", "19_performance.ipynb") == [
        "19_performance.ipynb cell planted: `greedy_decode(use_cache=False)` — `greedy_decode` has no parameter "
        f"`use_cache` (it takes: {', '.join(sorted(book().parameters(book().callables('greedy_decode')[0])))})"]
    for text in ("`greedy_decode` takes `use_cache`.", "`greedy_decode` has a parameter `use_cache=False`.",
                 "`greedy_decode` re-runs the prefix with `use_cache=False`."):
        assert len(planted(text, "19_performance.ipynb")) == 1, text
    last = list(inspect.signature(book().callables("greedy_decode")[0]).parameters)[-1]   # a real one
    assert planted(f"`greedy_decode(model, src, {last}=...)`; `greedy_decode` takes `{last}`.", "06_model.ipynb") == []


def test_a_chapter_that_does_not_define_the_name_fails():
    b = book()
    where = b.chapter_of("decode_corpus")                 # wherever it lives today
    true, wrong = min(where), next(n for n in (14, 13, 12) if n not in where)
    assert planted(f"Chapter {true}'s `decode_corpus` decodes.", "15_evaluation.ipynb") == []
    assert planted(f"`decode_corpus` (chapter {true}) decodes.", "15_evaluation.ipynb") == []
    assert planted(f"We call chapter {wrong}'s `decode_corpus`.", "15_evaluation.ipynb") == [
        f"15_evaluation.ipynb cell planted: `decode_corpus` — is in chapter {' and '.join(map(str, sorted(where)))}, "
        f"not chapter {wrong}"]
    assert len(planted(f"`decode_corpus` (chapter {wrong}) and `decode_corpus` of chapter {wrong}.",
                       "15_evaluation.ipynb")) == 2


def test_a_chapter_that_does_not_exist_fails():
    assert planted("As chapter 89 shows, and chapters 12 and 88.", "15_evaluation.ipynb") == [
        "15_evaluation.ipynb cell planted: chapter 88 — no notebook is numbered 88",
        "15_evaluation.ipynb cell planted: chapter 89 — no notebook is numbered 89"]


def test_names_flags_and_paths():
    ok = ["`SearchOptions.beam_size` and `load_model`", "`F.scaled_dot_product_attention`, `nn.Transformer`",
          "`torch.compile` and `sacrebleu.corpus_bleu`", "`--beam-size`",
          "`annotated-transformer translate --n-best 3`", "`tools/same_results.py`, `nbs/results/`",
          "`torchrun --standalone --nproc_per_node=2 -m annotated_transformer train`",
          "`(batch, len)` and `x + 1` and `2 ** 10`", "`checkpoints/multi30k-small/`"]
    for text in ok: assert planted(text, "14_decoding.ipynb") == [], text
    bad = ["`SearchOptions.beam_width`", "`load_models`", "`F.scaled_dot_attention`", "`--beam-sizes`",
           "`annotated-transformer translate --steps 3`", "`tools/no_such_tool.py`", "`torchrun --standalones`",
           "`annotated-transformer transl`", "`nn.Transformer(dropouts=0.1)`"]
    for text in bad: assert len(planted(text, "14_decoding.ipynb")) == 1, text


def test_the_reader():
    s = sentences("A `x` and ``y`z``. See chapter 3's `f`!\n\n```py\n`not read`\n```\n- `g`: item")
    assert [x.spans for x in s] == [["x", "y`z"], ["f"], ["g"]]
    assert Book.chapter_claims(s[1]) == [(3, 0)]
    assert comments_and_docstrings('def f(x):  # the `x`\n    "Does `f`."\n#| exports') == [" the `x`", "Does `f`."]


def test_doclinks_link_each_name_to_the_chapter_that_defines_it(monkeypatch):
    "nbdev turns each backticked name of the package into a link to its page (the preview's too): the right chapter."
    from nbdev.config import nbpath2html
    from nbdev.doclinks import NbdevLookup
    spec = importlib.util.spec_from_file_location("render_docs", ROOT / "tools" / "render_docs.py")
    render_docs = sys.modules.setdefault("render_docs", importlib.util.module_from_spec(spec))
    if not hasattr(render_docs, "local_doc_links"): spec.loader.exec_module(render_docs)
    monkeypatch.chdir(ROOT)                   # nbdev reads the project's settings ([tool.nbdev]) from here
    b, look = book(), NbdevLookup()
    documented = {q[len(m) + 1:] for m, syms in b.syms.items() for q in syms}
    names = sorted({n for path in book_files() for _, text in prose_of(path) for s in sentences(text)
                    for x in s.spans if (n := b.span_name(x)) in documented})
    assert len(names) > 100, names
    unlinked = [n for n in names if not look.doc(n)]
    assert not unlinked, (f"nbdev's doclinks leave {len(unlinked)} names of the package unlinked, e.g. "
                          f"{unlinked[:5]}: pyproject.toml's [tool.nbdev] needs strip_libs = \"{PKG}\"")
    wrong = []
    for n in names:
        href = look.doc(n)
        local = render_docs.local_doc_links(f"[`{n}`]({href})")
        pages = {nbpath2html(b.notebook_of[m]).name for m in b.modules_defining(n) if m in b.notebook_of}
        if local.split("](")[1].split("#")[0] not in pages: wrong.append(f"`{n}` -> {local} (defined on {pages})")
    assert not wrong, "doclinks to the wrong page:\n" + "\n".join(wrong)


def test_the_allowlist_is_still_needed():
    "An entry the book no longer writes, or that now resolves, leaves the list."
    written = {x.strip() for path in book_files() for _, text in prose_of(path)
               for s in sentences(text) for x in s.spans}
    unused = [k for k in ALLOWLIST if k not in written]
    assert not unused, f"ALLOWLIST entries the book no longer writes: {unused}"
    b = book()
    saved = dict(ALLOWLIST)
    try:
        ALLOWLIST.clear()
        resolved = [k for k in saved if not b.check_sentence(Sentence("\x000\x00", [k]), set())]
    finally: ALLOWLIST.update(saved)
    assert not resolved, f"ALLOWLIST entries that resolve without it: {resolved}"


if __name__ == "__main__":
    paths = [Path(a) if Path(a).exists() else NBS / a for a in sys.argv[1:]] or book_files()
    if book().broken: print(f"modules that do not import (their names will not resolve): {book().broken}")
    found = [f for p in paths for f in findings(p)]
    print("\n".join(found))
    print(f"{len(found)} unresolved")
