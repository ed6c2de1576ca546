"""One source for each default: no two dataclasses of the package declare the same field with the same literal default
(a number or a string; None, True and False say "off" or "not given" and are not counted). A default written twice drifts:
the search's beam 4 and α 0.6 were once in four places. Where one options object needs another's value it holds the other
(`Multi30kRecipe.search_options`, a `SearchOptions`) or names its default (`Multi30kRecipe.precision = FitOptions.precision`).
The package's source is read with `ast`, so nothing is imported. Function signatures are not checked (yet): their
defaults mostly restate a dataclass's for callers who pass none."""
import ast
from collections import defaultdict
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "annotated_transformer"

# (field, default): the dataclasses that may each declare it, and why they are different things
ALLOWLIST = {
    ("label_smoothing", "0.1"): ({"CopyRecipe", "Multi30kRecipe"},
        "each recipe is a complete table of its run's numbers (chapters 12 and 16), changed on its own"),
    ("dropout", "0.1"): ({"TransformerConfig", "Multi30kRecipe"},
        "the paper's P_drop of its base model (chapter 6) against a Multi30k recipe's own choice (chapter 16)"),
    ("accum_steps", "1"): ({"FitOptions", "Multi30kRecipe"},
        "`fit`'s 1 means no accumulation; the recipe's is an entry of its table, set per recipe"),
    ("seed", "0"): ({"CopyRecipe", "BenchShape"},
        "the copy task's training run and a benchmark's synthetic weights and batch: unrelated seeds"),
}


def _is_dataclass(node: ast.ClassDef) -> bool:
    def name(d):
        d = d.func if isinstance(d, ast.Call) else d
        return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None)
    return any(name(d) == "dataclass" for d in node.decorator_list)


def literal_defaults() -> dict:
    "(field, repr of its literal default) -> [(module, dataclass), ...] over the package's dataclasses."
    found = defaultdict(list)
    for f in sorted(PKG.glob("*.py")):
        if f.name.startswith("_"): continue                      # _modidx.py, __init__.py, __main__.py
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ClassDef) and _is_dataclass(node)): continue
            for st in node.body:
                if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
                        and isinstance(st.value, ast.Constant)): continue
                v = st.value.value
                if v is None or isinstance(v, bool): continue
                found[(st.target.id, repr(v))].append((f.stem, node.name))
    return found


def duplicates(found: dict) -> dict:
    "The (field, default) pairs declared in more than one dataclass and not allowed for those classes."
    return {k: where for k, where in found.items()
            if len(where) > 1 and not {c for _, c in where} <= ALLOWLIST.get(k, (set(),))[0]}


def test_no_default_declared_twice():
    dups = duplicates(literal_defaults())
    assert not dups, "a default declared in more than one dataclass (hold or name the other's instead): " + "; ".join(
        f"{name} = {v} in {', '.join(f'{m}.{c}' for m, c in where)}" for (name, v), where in dups.items())


def test_the_check_finds_a_duplicate():
    found = literal_defaults()
    assert ("beam_size", "4") in found and [c for _, c in found[("beam_size", "4")]] == ["SearchOptions"]
    planted = {**found, ("beam_size", "4"): [*found[("beam_size", "4")], ("benchmarking", "TranslationBench")]}
    assert ("beam_size", "4") in duplicates(planted)


def test_allowlist_is_current():
    "Every allowed coincidence still exists, so the list does not outlive its reasons."
    found = literal_defaults()
    for k, (classes, why) in ALLOWLIST.items():
        assert why and {c for _, c in found.get(k, [])} == classes, (k, found.get(k))
