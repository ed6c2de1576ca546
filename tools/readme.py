#!/usr/bin/env python3
"""Write README.md from nbs/index.ipynb without Quarto (which `nbdev-readme` needs).

Markdown cells are copied, visible code cells become ```python blocks followed by their text output; an
`#| echo: false` cell gives only the Markdown it displays (prose computed from stored results, as the website shows
it); `#| hide` cells and nbdev directives are dropped. The website (rendered from the same notebook) links its
chapters relatively (`multi30k.html`); on the repository's front page those lead nowhere, so README.md gets
them as absolute links to the website (the Documentation URL of pyproject.toml).
`python tools/readme.py --check` exits 1 if README.md is out of date (CI runs it)."""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = re.search(r'^Documentation\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M).group(1)
# A relative link to a page: `](page.html)`, `](page.html#anchor)`, `href="page.html"`; not `https:…`, `/…` or `#…`.
REL_HTML = re.compile(r'(\]\(|href=")(?![A-Za-z][A-Za-z0-9+.-]*:|/|#)([^)"\s]+?\.html(?:#[^)"\s]*)?)(?=[)"\s])')
HEADER = "<!-- WARNING: generated from nbs/index.ipynb by tools/readme.py; edit the notebook, not this file. -->\n\n"


def absolute_links(md: str, site: str = SITE) -> str:
    "Markdown with each relative `*.html` link made absolute on `site` (the website's base URL)."
    return REL_HTML.sub(lambda m: m[1] + site.rstrip("/") + "/" + m[2].removeprefix("./"), md)


def _text_output(cell):
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name") == "stdout": out.append("".join(o["text"]))
        elif o.get("output_type") in ("execute_result", "display_data") and "text/plain" in o.get("data", {}) \
                and not any(k.startswith("image/") for k in o["data"]):
            out.append("".join(o["data"]["text/plain"]) + "\n")
    return "".join(out).rstrip("\n")


def _markdown_output(cell) -> str:
    "The Markdown a cell displays (`IPython.display.Markdown`), as Markdown."
    return "\n\n".join("".join(o["data"]["text/markdown"]).strip() for o in cell.get("outputs", [])
                       if o.get("output_type") in ("execute_result", "display_data")
                       and "text/markdown" in o.get("data", {}))


def render(nb_path=ROOT / "nbs" / "index.ipynb") -> str:
    nb = json.loads(Path(nb_path).read_text(encoding="utf-8"))
    parts = []
    for c in nb["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] == "markdown":
            parts.append(absolute_links(src.strip()))
            continue
        lines = src.splitlines()
        flags = [l for l in lines if l.startswith("#|")]
        if any(re.match(r"#\|\s*(hide|exporti?|exports)\b", l) for l in flags): continue
        if any(re.match(r"#\|\s*echo:\s*false\b", l) for l in flags):   # its output only, as on the website
            if md := _markdown_output(c): parts.append(absolute_links(md))
            continue
        code = "\n".join(l for l in lines if not l.startswith("#|")).strip()
        if code: parts.append(f"```python\n{code}\n```")
        out = _text_output(c)
        if out: parts.append(f"```\n{out}\n```")
    return HEADER + "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    txt, readme = render(), ROOT / "README.md"
    if "--check" in sys.argv:
        if not readme.exists() or readme.read_text(encoding="utf-8") != txt:
            sys.exit("README.md is out of date with nbs/index.ipynb: run `python tools/readme.py`")
    else:
        readme.write_text(txt, encoding="utf-8")
