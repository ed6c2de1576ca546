"""The reader practises: the exercises at the end of the paper's chapters, and their checks (appendix `exercises`).

- chapters 01–06, 08–11, 14 and 15 end with `## Exercises`: 2–4 exercises, each under `### Exercise CC.N: title`;
- every heading's id is filed in `EXERCISES` with the same title, and every filed id has its heading; at least 30
  exercises, at least 12 of them implement;
- every solution passes its check (`run_solutions`: the section run top to bottom, each solution after its answer);
- every known mistake is caught with its own hint; every implement check knows at least two;
- a section is at most a quarter of its chapter's cells;
- the reader's notebooks the package ships are current and hold no solution; the command line writes one;
- every numbered page links to its notebook and to Colab, and its first code cell installs the package if missing."""
import json, re, subprocess, sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from annotated_transformer.exercises import EXERCISES, INSTALL, check, exercise_section, run_solutions, solutions

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ["01", "02", "03", "04", "05", "06", "08", "09", "10", "11", "14", "15"]
PAGES = sorted((ROOT / "nbs").glob("[0-9][0-9]_*.ipynb"))     # every numbered page; chapter 95 has four
NBS = {p.name[:2]: p for p in PAGES if int(p.name[:2]) < 90}   # the paper's chapters, by number
HEADING = re.compile(r"^### Exercise (\d\d\.\d+): (.+)$", re.M)


torch.set_num_threads(1)   # the solutions are tiny; two threads per worker only fight over the cores


def load(chapter: str) -> dict: return json.loads(NBS[chapter].read_text(encoding="utf-8"))
def text(cell) -> str: return "".join(cell["source"])


def headings(chapter: str) -> list[tuple[str, str]]:
    return [h for c in exercise_section(load(chapter)) if c["cell_type"] == "markdown" for h in HEADING.findall(text(c))]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_ends_with_its_exercises(chapter):
    found = headings(chapter)
    assert 2 <= len(found) <= 4, f"chapter {chapter}: {len(found)} exercises, 2 to 4 expected"
    assert [i for i, _ in found] == [f"{chapter}.{n}" for n in range(1, len(found) + 1)], "numbered CC.1, CC.2, … in order"
    for i, title in found:
        assert i in EXERCISES, f"{i} has a heading but no check"
        assert EXERCISES[i].title == title.strip(), f"{i}: the heading says {title!r}, the check {EXERCISES[i].title!r}"


def test_every_check_has_its_exercise_and_the_counts_hold():
    shown = {i for ch in CHAPTERS for i, _ in headings(ch)}
    assert set(EXERCISES) == shown, f"checks without an exercise: {sorted(set(EXERCISES) - shown)}"
    kinds = Counter(ex.kind for ex in EXERCISES.values())
    assert len(EXERCISES) >= 30 and kinds["implement"] >= 12, kinds


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_solution_passes_its_check(chapter):
    verdicts = run_solutions(load(chapter))
    assert [v.exercise for v in verdicts] == [i for i, _ in headings(chapter)], "one solution per exercise, in order"
    assert all(verdicts), "\n".join(map(repr, verdicts))


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_every_known_mistake_gets_its_own_hint(exercise):
    ex = EXERCISES[exercise]
    if ex.kind == "implement":
        assert len(ex.mistakes) >= 2, f"{exercise}: an implement check knows at least two mistakes"
    for m in ex.mistakes:
        v = check(exercise, m.answer)
        assert not v.passed and v.mistake == m.name, f"{exercise} {m.name!r}: {v!r}"
        assert m.hint in v.line and "\n" not in v.line


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_exercises_are_at_most_a_quarter_of_the_chapter(chapter):
    nb = load(chapter)
    assert len(exercise_section(nb)) * 4 <= len(nb["cells"]), f"{len(exercise_section(nb))} of {len(nb['cells'])} cells"


def test_the_shipped_notebooks_are_current_and_hold_no_solution():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "exercises.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    shipped = sorted((ROOT / "annotated_transformer" / "exercise_notebooks").glob("*.ipynb"))
    assert [p.name[:2] for p in shipped] == CHAPTERS
    for p in shipped:
        body = p.read_text(encoding="utf-8")
        assert "## Solution" not in body and not solutions(body) and "#|" not in body, p.name


def test_the_command_line_writes_a_chapters_exercises(tmp_path):
    out = tmp_path / "ex02.ipynb"
    r = subprocess.run([sys.executable, "-m", "annotated_transformer", "exercises", "2", "--output", str(out)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    nb = json.loads(out.read_text(encoding="utf-8"))
    assert nb["cells"][1]["source"] == INSTALL and "### Exercise 02.1" in json.dumps(nb)
    r = subprocess.run([sys.executable, "-m", "annotated_transformer", "exercises", "07", "--output", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "chapter '07' has no exercises; these do: 01, 02" in r.stderr, r.stderr


@pytest.mark.parametrize("nb", PAGES, ids=lambda p: p.name)
def test_every_page_links_to_its_notebook_and_installs_the_package(nb):
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    links = text(cells[1])
    assert f"(https://colab.research.google.com/github/annotated-transformer/annotated_transformer/blob/main/nbs/{nb.name})" in links
    assert f"(https://github.com/annotated-transformer/annotated_transformer/blob/main/nbs/{nb.name})" in links
    first_code = next(c for c in cells if c["cell_type"] == "code")
    assert text(first_code) == "#| hide\n#| eval: false\n" + INSTALL   # nbdev runs it neither in tests nor docs
