#!/usr/bin/env python3
"""Build the reader's exercise notebooks that the package ships, one per chapter with exercises, from the chapters'
`## Exercises` sections (`exercise_notebook`: the questions, empty answers and checks; no solutions).
`annotated-transformer exercises CC --output FILE` copies one out.

    python tools/exercises.py            # write annotated_transformer/exercise_notebooks/CC_topic.ipynb
    python tools/exercises.py --check    # exit 1 when one is missing or stale (tests/test_exercises.py runs it)"""
from __future__ import annotations
import argparse, json, sys
from pathlib import Path

from annotated_transformer.exercises import exercise_notebook

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "annotated_transformer" / "exercise_notebooks"


def chapters(nbs: Path = ROOT / "nbs") -> list[Path]:
    "The paper's chapter notebooks (below the floor, 90) with an `## Exercises` section."
    return [p for p in sorted(nbs.glob("[0-9][0-9]_*.ipynb")) if int(p.name[:2]) < 90
            and any(c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## Exercises")
                   for c in json.loads(p.read_text(encoding="utf-8"))["cells"])]


def built(nb_path: Path) -> str:
    "The reader's notebook of one chapter, as the text the package ships."
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    title = "".join(nb["cells"][0]["source"]).splitlines()[0].lstrip("# ").strip()
    return json.dumps(exercise_notebook(nb, f"{nb_path.name[:2]} {title}"), indent=1, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say whether the shipped notebooks are current")
    args = ap.parse_args(argv)
    want = {p.name: built(p) for p in chapters()}
    have = {p.name: p.read_text(encoding="utf-8") for p in OUT.glob("*.ipynb")}
    if args.check:
        stale = sorted(n for n in want.keys() | have.keys() if want.get(n) != have.get(n))
        if stale: print(f"stale exercise notebooks (run python tools/exercises.py): {', '.join(stale)}")
        return 1 if stale else 0
    OUT.mkdir(exist_ok=True)
    for name in have.keys() - want.keys(): (OUT / name).unlink()
    for name, text in want.items(): (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(want)} exercise notebooks to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__": sys.exit(main())
