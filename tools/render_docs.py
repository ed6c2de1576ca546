#!/usr/bin/env python3
"""Render the book to static HTML without Quarto: a preview of the site, and what the browser test checks.

Input: the notebooks that `nbdev-proc-nbs` wrote to `_proc/` (show_doc cells executed, nbdev directives
turned into Quarto cell options). Each is turned into Pandoc Markdown the way Quarto would (the cell options
`include`, `echo`, `output`, `output: asis`, `code-fold`, `code-summary`, `warning`, `fig-cap`, `fig-alt`,
`label: fig-…` and `@fig-…` cross-references are honoured), then Pandoc (the `pypandoc_binary` wheel)
writes one standalone page per notebook with MathML math (rendered natively by the browser: no network, no
MathJax), figures embedded as data URIs and a sidebar built from `sidebar.yml`.

Backticked names are links, as on the site: nbdev's doclinks (`nbdev-proc-nbs` runs them) turn each name of the
package into a link to the page that documents it, on the published site (`doc_host` + `doc_baseurl`). The preview
points the same links at its own pages (`decoding.html#beam_search`), so they work offline and the browser test
follows them; `Page.doc_links` lists them.

    python tools/render_docs.py --process     # -> test-output/docs/html/index.html
    python tools/render_docs.py --proc _proc --out some/folder

The site itself is built by Quarto (`nbdev-docs`); this preview differs in looks, not in content."""
from __future__ import annotations
import argparse, base64, html, json, re, subprocess, sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml")
_ansi = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def pandoc_path() -> str:
    "The pandoc executable shipped by the `pypandoc_binary` wheel (falls back to one on PATH)."
    try:
        import pypandoc
        return pypandoc.get_pandoc_path()
    except Exception:
        import shutil
        if p := shutil.which("pandoc"): return p
        raise RuntimeError("pandoc not found: `pip install pypandoc_binary` (in the dev extra)")


def _src(x) -> str: return "".join(x) if isinstance(x, list) else (x or "")


def split_options(source: str) -> tuple[dict, str]:
    "Leading `#| key: value` lines of a code cell, parsed as YAML, and the remaining code."
    lines, opts = source.splitlines(), []
    while lines and lines[0].startswith("#|"):
        line = lines.pop(0)[2:]
        opts.append(line[1:] if line.startswith(" ") else line)
    try: parsed = yaml.safe_load("\n".join(opts)) or {} if opts else {}
    except yaml.YAMLError: parsed = {}
    return (parsed if isinstance(parsed, dict) else {}), "\n".join(lines)


def _fence(text: str, classes: str = "") -> str:
    "A fenced code block long enough not to be closed by backticks inside `text`."
    n = max([3] + [len(m) + 1 for m in re.findall(r"`{3,}", text)])
    return f"{'`' * n}{' {' + classes + '}' if classes else ''}\n{text.rstrip()}\n{'`' * n}"


def _is_false(v) -> bool: return v is False or str(v).lower() == "false"


def site_url(root: Path = ROOT) -> str | None:
    "The address nbdev's doclinks start with: `doc_host` + `doc_baseurl` from the package's index (_modidx.py)."
    import ast
    try:
        tree = ast.parse((root / "annotated_transformer" / "_modidx.py").read_text(encoding="utf-8"))
        d = ast.literal_eval(next(n.value for n in tree.body if isinstance(n, ast.Assign)))
        st = d["settings"]
        return st["doc_host"].rstrip("/") + "/" + st["doc_baseurl"].strip("/") + "/"
    except (OSError, StopIteration, KeyError, ValueError, SyntaxError): return None


SITE = site_url()


def local_doc_links(md: str, page: "Page | None" = None, site: str | None = SITE) -> str:
    "nbdev's doclinks to the published site (`[`name`](SITE/page.html#anchor)`) as links to the preview's pages."
    if not site: return md
    def local(m):
        href = m[2][len(site):]
        if page is not None: page.doc_links.append((m[1], href))
        return f"[{m[1]}]({href})"
    return re.sub(r"\[(`[^`\]]+`)\]\((" + re.escape(site) + r"[^)\s]*)\)", local, md)


@dataclass
class Page:
    "One rendered notebook and what the browser should find in it."
    notebook: str                   # name of the notebook in nbs/, e.g. "02_attention.ipynb"
    html: str                       # output file name, e.g. "attention.html"
    title: str
    n_images: int = 0               # image outputs shown on the page
    n_captions: int = 0             # of which with a caption (`#| fig-cap:`)
    n_math: int = 0                 # math formulas (Pandoc's count of Math elements)
    show_docs: list = field(default_factory=list)   # names documented by show_doc
    pandoc_warnings: list = field(default_factory=list)
    long_unfolded: list = field(default_factory=list)  # (first line, n_lines) of long code cells shown unfolded
    doc_links: list = field(default_factory=list)   # (name, href) of each doclink, href made relative


class NotebookToMarkdown:
    "Quarto-like conversion of one processed notebook to Pandoc Markdown."
    LONG = 40  # a visible code cell longer than this many lines should fold (`#| code-fold: true`)

    def __init__(self, nb: dict, name: str):
        self.nb, self.name, self.meta, self.fig_no, self.labels = nb, name, {}, 0, {}
        self.page = Page(name, Path(name).with_suffix(".html").name, Path(name).stem)

    def convert(self) -> str:
        cells = self.nb.get("cells", [])
        self._number_figures(cells)
        parts = []
        for i, c in enumerate(cells):
            src = _src(c.get("source"))
            if c["cell_type"] == "raw":
                if i == 0 and src.lstrip().startswith("---"):
                    body = src.strip().strip("-").strip()
                    self.meta = yaml.safe_load(body) or {}
                else: parts.append(src)
            elif c["cell_type"] == "markdown": parts.append(self._xref(local_doc_links(src, self.page)))
            elif c["cell_type"] == "code": parts.append(self._code(c, src))
        p = self.page
        p.html = self.meta.get("output-file", p.html)
        p.title = str(self.meta.get("title") or p.title)
        return "\n\n".join(x for x in parts if x.strip()) + "\n"

    def _number_figures(self, cells):
        "Quarto numbers figures whose cell has `label: fig-…`; collect them for `@fig-…` references."
        n = 0
        for c in cells:
            if c["cell_type"] != "code": continue
            opts, _ = split_options(_src(c.get("source")))
            lab = str(opts.get("label", ""))
            if lab.startswith("fig-"): n += 1; self.labels[lab] = n

    def _xref(self, md: str) -> str:
        return re.sub(r"@(fig-[\w-]+)", lambda m: f"[Figure {self.labels[m[1]]}](#{m[1]})"
                      if m[1] in self.labels else m[0], md)

    def _code(self, cell, src) -> str:
        opts, code = split_options(src)
        if _is_false(opts.get("include", True)): return ""
        out, classes = [], ".cell"
        is_doc = bool(re.match(r"\s*show_doc\(", code)) and str(opts.get("output", "")) == "asis"
        if is_doc:
            classes += " .show-doc"
            self.page.show_docs.append(re.match(r"\s*show_doc\(([^,)]+)", code)[1].strip())
        if not _is_false(opts.get("echo", True)) and code.strip():
            block = _fence(code, ".python .cell-code")
            fold = opts.get("code-fold", False)
            if fold is True or str(fold).lower() in ("true", "show"):
                summary = html.escape(str(opts.get("code-summary", "Code")))
                block = (f'<details class="code-fold"{" open" if str(fold) == "show" else ""}>\n'
                         f"<summary>{summary}</summary>\n\n{block}\n\n</details>")
            elif code.count("\n") + 1 > self.LONG:
                self.page.long_unfolded.append((code.splitlines()[0][:60], code.count("\n") + 1))
            out.append(block)
        if not _is_false(opts.get("output", True)):
            caps = opts.get("fig-cap") or []
            caps = [caps] if isinstance(caps, str) else list(caps)
            alts = opts.get("fig-alt") or []
            alts = [alts] if isinstance(alts, str) else list(alts)
            n_img = 0
            for o in cell.get("outputs", []):
                t = o.get("output_type")
                if t == "stream":
                    if o.get("name") == "stderr" and _is_false(opts.get("warning", True)): continue
                    out.append(f"::: {{.cell-output .cell-output-{o.get('name', 'stdout')}}}\n"
                               f"{_fence(_ansi.sub('', _src(o.get('text'))))}\n:::")
                elif t == "error":
                    tb = _ansi.sub("", "\n".join(o.get("traceback", [])))
                    out.append(f"::: {{.cell-output .cell-output-error}}\n{_fence(tb)}\n:::")
                elif t in ("execute_result", "display_data"):
                    d = o.get("data", {})
                    img = next((m for m in IMAGE_MIMES if m in d), None)
                    if img:
                        cap = caps[n_img] if n_img < len(caps) else ""
                        alt = alts[n_img] if n_img < len(alts) else ""
                        out.append(self._figure(img, _src(d[img]), cap, alt, opts, n_img))
                        n_img += 1
                    elif "text/html" in d:
                        out.append(f"::: {{.cell-output .cell-output-display}}\n```{{=html}}\n{_src(d['text/html'])}\n```\n:::")
                    elif "text/markdown" in d:
                        md = local_doc_links(_src(d["text/markdown"]), self.page)
                        out.append(md if str(opts.get("output")) == "asis"
                                   else f"::: {{.cell-output .cell-output-display}}\n{md}\n:::")
                    elif "text/latex" in d:
                        out.append(f"::: {{.cell-output .cell-output-display}}\n{_src(d['text/latex'])}\n:::")
                    elif "text/plain" in d:
                        out.append(f"::: {{.cell-output .cell-output-display}}\n{_fence(_src(d['text/plain']))}\n:::")
        if not out: return ""
        body = "\n\n".join(out)
        return f"::::::: {{{classes}}}\n{body}\n:::::::"

    def _figure(self, mime, data, cap, alt, opts, idx) -> str:
        self.page.n_images += 1
        if mime == "image/svg+xml" and not data.lstrip().startswith(("PHN2", "PD94")):  # raw SVG text
            data = base64.b64encode(data.encode()).decode()
        data = re.sub(r"\s+", "", data)
        lab = str(opts.get("label", ""))
        ident = f"#{lab}" if lab.startswith("fig-") and idx == 0 else ""
        if cap:
            self.page.n_captions += 1
            if ident: cap = f"Figure {self.labels[lab]}: {cap}"
        attrs = " ".join(x for x in [ident, ".cell-figure", f'fig-alt="{html.escape(alt)}"' if alt else ""] if x)
        img = f"![{cap}](data:{mime};base64,{data}){{{attrs}}}"
        return f"::: {{.cell-output .cell-output-display}}\n{img}\n:::"


def load_sidebar(proc: Path) -> list:
    "sidebar.yml as [(section or None, notebook name, link text or None)], in order."
    y = yaml.safe_load((proc / "sidebar.yml").read_text(encoding="utf-8"))
    res = []
    def walk(items, section):
        for it in items:
            if isinstance(it, str): res.append((section, it, None))
            elif isinstance(it, dict) and "section" in it: walk(it.get("contents", []), it["section"])
            elif isinstance(it, dict) and "href" in it: res.append((section, it["href"], it.get("text")))
    walk(y["website"]["sidebar"]["contents"], None)
    return res


PREVIEW_CSS = """
body { max-width: none; margin: 0; padding: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       font-size: 16px; line-height: 1.55; color: #212529; background: #fff; }
.layout { display: grid; grid-template-columns: 17rem minmax(0, 1fr); min-height: 100vh; }
nav.book { background: #f7f7f9; border-right: 1px solid #e3e3e8; padding: 1rem 0.9rem; font-size: 0.9rem; }
nav.book .book-title { font-weight: 700; font-size: 1.05rem; margin-bottom: 0.8rem; display: block; color: #2780e3; }
nav.book .section { font-weight: 600; margin: 0.9rem 0 0.2rem; color: #555; }
nav.book ul { list-style: none; padding-left: 0.4rem; margin: 0; }
nav.book li { margin: 0.15rem 0; }
nav.book a { color: #343a40; text-decoration: none; }
nav.book a.active { color: #2780e3; font-weight: 600; }
main.content { padding: 1.5rem 2.5rem 4rem; max-width: 58rem; }
@media (max-width: 991.98px) {   /* as Quarto folds its sidebar: a phone's width goes to the page */
  .layout { display: block; } nav.book { display: none; } main.content { padding: 1rem; } }
header#title-block-header h1.title { margin-bottom: 0.2rem; }
header#title-block-header p.subtitle { font-style: italic; opacity: 0.75; font-size: 1.15rem; margin-top: 0; }
nav#TOC { font-size: 0.85rem; border: 1px solid #e3e3e8; padding: 0.4rem 1rem; margin-bottom: 1.5rem; background: #fcfcfd; }
nav#TOC > ul { padding-left: 1rem; }
pre, code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.86em; }
div.sourceCode, .cell-output pre { background: #f8f8fa; border-radius: 3px; padding: 0.2rem 0.6rem; overflow-x: auto; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }   /* code-overflow: wrap, as in _quarto.yml */
div.cell { margin: 0.8rem 0; }
details.code-fold > summary { cursor: pointer; color: #6c757d; font-size: 0.9rem; }
.show-doc { border: 1px solid #dee2e6; border-radius: 6px; padding: 0.2rem 1rem 0.4rem; margin: 1.2rem 0 0.6rem;
            box-shadow: 0 1px 2px rgba(0,0,0,0.05); }
.show-doc hr { display: none; }
.show-doc h3, .show-doc h4 { margin-top: 0.5rem; font-family: "DejaVu Sans Mono", monospace; }
.cell-output-stderr pre { background: #fff5f5; }
figure { margin: 1rem 0; }
figure img, .cell-output-display img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9rem; color: #555; margin-top: 0.3rem; }
[class^="callout"], [class*=" callout"] { border-left: 5px solid #0d6efd; background: #f3f7ff; padding: 0.3rem 1rem;
            border-radius: 4px; margin: 1rem 0; }
.callout-warning { border-left-color: #ffc107; background: #fffaf0; }
.callout-tip { border-left-color: #198754; background: #f3fbf6; }
[class*="callout"] > h2, [class*="callout"] > h3 { font-size: 1rem; margin: 0.4rem 0; }
details[class*="callout"] > summary { font-weight: 600; margin: 0.4rem 0; cursor: pointer; }
math[display="block"] { margin: 0.6rem 0; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border-bottom: 1px solid #dee2e6; padding: 0.25rem 0.7rem; text-align: left; }
"""


def _nav_html(entries, titles, current) -> str:
    out, last = ['<nav class="book"><a class="book-title" href="index.html">The Annotated Transformer</a>'], object()
    open_ul = False
    for section, nb, text in entries:
        if section != last:
            if open_ul: out.append("</ul>")
            if section: out.append(f'<div class="section">{html.escape(section)}</div>')
            out.append("<ul>"); open_ul, last = True, section
        if nb not in titles:   # not rendered (nbdev could not process it): no dead link
            out.append(f'<li class="missing">{html.escape(text or Path(nb).stem)} (not rendered)</li>'); continue
        href, title = titles[nb]
        cls = ' class="active"' if nb == current else ""
        out.append(f'<li><a href="{href}"{cls}>{html.escape(text or title)}</a></li>')
    if open_ul: out.append("</ul>")
    out.append("</nav>")
    return "\n".join(out)


def render_site(proc: Path, out: Path, notebooks: list[str] | None = None) -> list[Page]:
    "Render every processed notebook in `proc` (or those named) to `out`; returns the pages with what they should show."
    proc, out = Path(proc), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = notebooks or sorted(p.name for p in proc.glob("*.ipynb") if not p.name.startswith("_"))
    convs = {}
    for n in names:
        c = NotebookToMarkdown(json.loads((proc / n).read_text(encoding="utf-8")), n)
        convs[n] = (c, c.convert())
    titles = {n: (c.page.html, c.page.title) for n, (c, _) in convs.items()}
    entries = load_sidebar(proc) if (proc / "sidebar.yml").exists() else [(None, n, None) for n in names]
    css = [f for f in ("styles.css",) if (proc / f).exists()]
    for f in css: (out / f).write_text((proc / f).read_text(encoding="utf-8"), encoding="utf-8")
    (out / "preview.css").write_text(PREVIEW_CSS, encoding="utf-8")
    pandoc, pages = pandoc_path(), []
    folds = out / ".folds.lua"; folds.write_text(FOLD_LUA, encoding="utf-8")
    for n, (c, md) in convs.items():
        meta = {"title": c.page.title, "pagetitle": f"{c.page.title} – The Annotated Transformer"}
        if c.meta.get("description"): meta["subtitle"] = str(c.meta["description"])
        nav = out / f".nav-{c.page.html}"
        nav.write_text(_nav_html(entries, titles, n) + '\n<main class="content">', encoding="utf-8")
        after = out / ".after.html"; after.write_text("</main>", encoding="utf-8")
        doc = "---\n" + json.dumps(meta) + "\n---\n\n" + md
        fmt = "markdown-citations-yaml_metadata_block+yaml_metadata_block"
        args = [pandoc, "-f", fmt, "-t", "html5", "--standalone", "--mathml", "--toc", "--toc-depth=3",
                f"--lua-filter={folds}",
                *[f"--css={f}" for f in css + ["preview.css"]],
                f"--include-before-body={nav}", f"--include-after-body={after}", "-o", str(out / c.page.html)]
        # counting Math elements is a second pandoc run on the same text: the browser must show this many
        ast = subprocess.run([pandoc, "-f", fmt, "-t", "json"], input=doc, capture_output=True, text=True, check=True)
        c.page.n_math = ast.stdout.count('{"t":"Math"')
        r = subprocess.run(args, input=doc, capture_output=True, text=True)
        if r.returncode: raise RuntimeError(f"pandoc failed on {n}:\n{r.stderr}")
        c.page.pandoc_warnings = [l for l in r.stderr.splitlines() if l.startswith("[WARNING]")]
        nav.unlink(); pages.append(c.page)
        # wrap the body in the grid layout
        h = (out / c.page.html).read_text(encoding="utf-8")
        h = h.replace("<body>", '<body>\n<div class="layout">', 1).replace("</body>", "</div>\n</body>", 1)
        (out / c.page.html).write_text(h, encoding="utf-8")
    (out / ".after.html").unlink(missing_ok=True); folds.unlink()
    browser_assets(out)
    return pages


# Quarto's collapsible callouts (`::: {.callout-tip collapse="true"}`, a `## Title` first): a <details> element whose
# <summary> is the title, closed ("true") or open ("false"); the title leaves the table of contents, as on the site.
FOLD_LUA = r"""
local function esc(s) return (s:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end
function Div(el)
  local collapse = el.attributes["collapse"]
  if collapse == nil then return nil end
  local content, title = el.content, "Details"
  if #content > 0 and content[1].t == "Header" then
    title = pandoc.utils.stringify(content[1].content)
    content = pandoc.List({table.unpack(content, 2)})
  end
  local open = (collapse == "false") and " open" or ""
  local blocks = pandoc.List({pandoc.RawBlock("html", '<details class="' .. table.concat(el.classes, " ") .. '"'
    .. open .. '><summary>' .. esc(title) .. '</summary>')})
  blocks:extend(content)
  blocks:insert(pandoc.RawBlock("html", "</details>"))
  return blocks
end
"""


STUB_JS = """// The live translator's files are not built in this preview (the site's deploy workflow builds them).
document.querySelectorAll('#at-translate').forEach(el => {
  el.dataset.state = 'unbuilt';
  el.insertAdjacentHTML('beforeend', '<p>The live translator is not built in this preview: follow ' +
    '"Running the page locally" below (it builds <code>web/dist/</code>), then render again.</p>');
});
"""


def browser_assets(out: Path, dist: Path = ROOT / "web" / "dist"):
    "The page's files in `out/browser/`: web/dist as chapter 35's recipe builds it (bundle, runtime, models), else a stub."
    import shutil
    target = out / "browser"
    target.mkdir(parents=True, exist_ok=True)
    if (dist / "translate.js").is_file(): shutil.copytree(dist, target, dirs_exist_ok=True)   # chunks/ and models/ too
    else: (target / "translate.js").write_text(STUB_JS, encoding="utf-8")


def process(root: Path = ROOT, n_workers: int = 2) -> Path:
    "What `nbdev-proc-nbs` does, minus its check for Quarto (which, when missing, it tries to download)."
    import os
    from nbdev.serve import proc_nbs
    os.chdir(root)
    return proc_nbs(str(root / "nbs"), n_workers=n_workers)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--process", action="store_true", help="process the notebooks first (nbdev's proc_nbs, into _proc/)")
    ap.add_argument("--proc", default=str(ROOT / "_proc"), help="folder of processed notebooks (nbdev-proc-nbs writes _proc/)")
    ap.add_argument("--out", default=str(ROOT / "test-output" / "docs" / "html"), help="output folder")
    a = ap.parse_args()
    if a.process: process()
    if not Path(a.proc).is_dir(): sys.exit(f"{a.proc} not found: run with --process (or `nbdev-proc-nbs`) first")
    for p in render_site(Path(a.proc), Path(a.out)):
        print(f"{p.html:32s} {p.n_images:3d} figures ({p.n_captions} captioned) {p.n_math:4d} formulas "
              f"{len(p.show_docs):3d} show_doc" + "".join(f"\n  {w}" for w in p.pandoc_warnings))
    print(f"open {Path(a.out) / 'index.html'}")
