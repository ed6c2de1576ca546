"""A test under each export: the share of a notebook's exported cells that a testing cell follows.

An exported cell is a code cell with `#| export` or `#| exports`, unless it holds only imports. It counts as tested
when a code cell after it, and before the next exported cell, tests: it calls a `fastcore.test` check (`test_eq`,
`test_close`, `test_fail`, ...) or has an `assert` statement. A cell that only prints or draws is a demo, not a test;
a cell marked `#| eval: false` never runs, so it tests nothing (a `#| slow` one runs under `nbdev-test --flags slow`
and counts). Comments and strings do not count. The cell that only imports (a notebook's header) is not an export
to test."""
import ast, io, json, re, tokenize
from pathlib import Path

NBS = Path(__file__).parents[1] / "nbs"
BOOK_MIN = 0.60                                     # over every notebook together
CHAPTER_MIN = {"22_fast_model.ipynb": 0.70, "23_fast_decoding.ipynb": 0.70, "92_cli.ipynb": 0.70,
               "96_cli_train.ipynb": 0.70, "97_cli_translate.ipynb": 0.70, "98_cli_lab.ipynb": 0.70,
               "99_cli_tools.ipynb": 0.70}
EXPORT = re.compile(r"^\s*#\s*\|\s*exports?\s*$", re.MULTILINE)
NO_EVAL = re.compile(r"^\s*#\s*\|\s*eval\s*:\s*false\s*$", re.MULTILINE)
CHECKS = {"test_eq", "test_ne", "test_close", "test_is", "test_shuffled", "test_fail", "test_eq_type",
          "test_stdout", "test_warns", "test_sig", "test_fig_exists"}


def code_only(src: str) -> str:
    "The source with comments and string literals blanked, so a check named in prose does not count."
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline)
                if t.type not in (tokenize.COMMENT, tokenize.STRING)]
        return tokenize.untokenize((t.type, t.string) for t in toks)
    except (tokenize.TokenError, IndentationError, SyntaxError):  # a cell with IPython magics: drop the comments
        return "\n".join(l.split("#", 1)[0] for l in src.splitlines())


def does_test(src: str) -> bool:
    "Whether a (non-exported, evaluated) code cell calls a fastcore.test check or asserts."
    if NO_EVAL.search(src): return False
    code = code_only(src)
    return bool(re.search(r"\b(" + "|".join(sorted(CHECKS)) + r")\s*\(", code)
                or re.search(r"(^|[;:\s])assert\b", code))


def only_imports(src: str) -> bool:
    "An exported cell that holds only import statements (the notebook's header)."
    body = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!")))
    try: tree = ast.parse(body)
    except SyntaxError: return False
    return all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in tree.body)


def count(nb: Path) -> tuple[int, int]:
    "(exported cells, those a testing cell follows before the next exported cell) of one notebook."
    cells = [c for c in json.loads(nb.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    srcs = ["".join(c["source"]) for c in cells]
    exported = [i for i, s in enumerate(srcs) if EXPORT.search(s)]
    counted = [i for i in exported if not only_imports(srcs[i])]
    tested = 0
    for i in counted:
        nxt = next((j for j in exported if j > i), len(srcs))
        tested += any(does_test(s) for s in srcs[i + 1:nxt])
    return len(counted), tested


def table(counts: dict[str, tuple[int, int]]) -> str:
    rows = [f"{name:34} {t:4} of {n:4}  {t / n:5.0%}" for name, (n, t) in counts.items() if n]
    n, t = sum(n for n, _ in counts.values()), sum(t for _, t in counts.values())
    return "\n".join(["notebook                           tested of exports", *rows, f"{'book':34} {t:4} of {n:4}  "
                      f"{t / max(n, 1):5.0%}"])


def all_counts() -> dict[str, tuple[int, int]]:
    notebooks = sorted(NBS.glob("*.ipynb"))
    assert notebooks, f"no notebooks under {NBS}"
    return {nb.name: count(nb) for nb in notebooks}


def test_the_rule(tmp_path):
    assert does_test("test_eq(f(1), 2)") and does_test("x = f()\nassert x == 2, 'two'")
    assert does_test("for x in xs: assert x")
    assert not does_test("print(f(1))") and not does_test("# test_eq(f(1), 2)\nf(1)")
    assert not does_test("s = 'assert test_eq(x, 1)'") and not does_test("#| eval: false\ntest_eq(1, 1)")
    assert only_imports("#| exports\nimport torch\nfrom x import (a,\n    b)") and not only_imports("#| exports\nx = 1")
    cell = lambda s: {"cell_type": "code", "source": s, "metadata": {}, "outputs": []}
    nb = tmp_path / "nb.ipynb"
    nb.write_text(json.dumps({"cells": [cell("#| exports\nimport torch"), cell("#| exports\ndef f(): pass"),
                                        cell("f()"), {"cell_type": "markdown", "source": "test_eq(1, 1)"},
                                        cell("#| hide\ntest_eq(f(), None)"), cell("#| export\ndef g(): pass"),
                                        cell("print(g())"), cell("#| exports\nh = 1")]}))
    assert count(nb) == (3, 1)


def test_exports_are_followed_by_a_test():
    counts = all_counts()
    n, t = sum(n for n, _ in counts.values()), sum(t for _, t in counts.values())
    low = [f"{name}: {counts[name][1] / counts[name][0]:.0%} < {share:.0%}" for name, share in CHAPTER_MIN.items()
           if counts[name][0] and counts[name][1] / counts[name][0] < share]
    if t / n < BOOK_MIN: low.insert(0, f"book: {t / n:.0%} < {BOOK_MIN:.0%}")
    assert not low, "exports without a test under them:\n" + "\n".join(low) + "\n\n" + table(counts)
