"The book's prose reads as chapters, not run logs: no dated narrative and no issue numbers in any notebook's markdown."
import json, re
from pathlib import Path

NBS = Path(__file__).parents[1] / "nbs"
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")          # 2026-12-03; a plain year such as the paper's 2017 stays allowed
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)  # "issue 24", "Issue #12"
MAX_WORDS = {"19_performance.ipynb": 2500}            # the paper's claims about speed; the lab is chapter 24


def prose(nb: Path) -> list[str]:
    "The markdown cells of a notebook, one string each."
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def offending_lines(nb: Path) -> list[str]:
    "Each prose line with a YYYY-MM-DD date or an issue number, as 'notebook: line'."
    return [f"{nb.name}: {line.strip()[:160]}" for text in prose(nb) for line in text.splitlines()
            if DATE.search(line) or ISSUE.search(line)]


def test_the_patterns():
    assert DATE.search("run on 2026-12-03") and not DATE.search("Vaswani et al., 2017")
    assert ISSUE.search("(issue 24)") and ISSUE.search("Issue #12") and not ISSUE.search("an issue of speed")


def test_no_dates_or_issue_numbers_in_prose():
    notebooks = sorted(NBS.glob("*.ipynb"))
    assert notebooks, f"no notebooks under {NBS}"
    bad = [line for nb in notebooks for line in offending_lines(nb)]
    assert not bad, "dated narrative or issue numbers in prose (history goes to CHANGELOG.md):\n" + "\n".join(bad)


def test_performance_chapter_prose_stays_short():
    for name, limit in MAX_WORDS.items():
        words = sum(len(text.split()) for text in prose(NBS / name))
        assert words <= limit, f"{name}: {words} words of prose, at most {limit}"
