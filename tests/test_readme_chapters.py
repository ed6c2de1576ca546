"""The README's table of chapters (from nbs/index.ipynb, "The chapters") lists every chapter of the book's sidebar
(nbs/sidebar.yml), and nothing else: a chapter added to the sidebar but not to the table is one a reader of the
repository's front page never finds."""
import importlib.util, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("render_docs", ROOT / "tools" / "render_docs.py")
render_docs = sys.modules.setdefault("render_docs", importlib.util.module_from_spec(spec))
if not hasattr(render_docs, "load_sidebar"): spec.loader.exec_module(render_docs)


def page(notebook: str) -> str:
    "The website's page of a notebook: nbdev drops the number, `22_fast_model.ipynb` → `fast_model`."
    return re.sub(r"^\d+_", "", Path(notebook).stem)


def chapter_table(readme: str) -> str:
    "The rows of the table under the README's heading `## The chapters`."
    section = readme.split("\n## The chapters\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(l for l in section.splitlines() if l.startswith("|"))


def test_the_readme_lists_every_chapter_of_the_sidebar():
    table = chapter_table((ROOT / "README.md").read_text(encoding="utf-8"))
    linked = set(re.findall(r"\]\([^)\s]*?/?([A-Za-z0-9_]+)\.html(?:#[^)]*)?\)", table))
    chapters = [nb for _, nb, _ in render_docs.load_sidebar(ROOT / "nbs") if nb != "index.ipynb"]
    missing = [nb for nb in chapters if page(nb) not in linked]
    assert not missing, (f"nbs/sidebar.yml has chapters that the README's chapter table leaves out: {missing}; "
                         f"add them to the table in nbs/index.ipynb, then run `python tools/readme.py`")
    extra = sorted(linked - {page(nb) for nb in chapters})
    assert not extra, f"the README's chapter table links pages that are not chapters of nbs/sidebar.yml: {extra}"
