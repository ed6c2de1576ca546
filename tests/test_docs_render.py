"""The book, rendered and opened in a real browser (headless Chromium), without Quarto.

`nbdev-proc-nbs` (run on a copy of the project, with a stub `quarto` on PATH so that it does not try to
download Quarto) processes the notebooks as for the site: show_doc cells inserted and executed, nbdev directives
turned into Quarto cell options. tools/render_docs.py turns each processed notebook into an HTML page with Pandoc
(MathML math, figures as data URIs, captions from `#| fig-cap:`), and headless Chromium, driven over the DevTools
protocol (`--remote-debugging-pipe`: no port, no extra package), opens every page and checks: no JavaScript or
loading error; every formula laid out as MathML and no TeX left as text; every figure decoded (naturalWidth > 0),
not cut off, not blank; every show_doc block rendered; every relative link resolving. One full-page screenshot
per page goes to test-output/docs/screenshots/, the pages to test-output/docs/html/ (open index.html there to
read the book offline). `test_checks_catch_a_broken_figure_and_formula` shows that the checks do fail.

Needs /usr/bin/chromium (Debian's `chromium`; .ci/run installs it): skipped without it unless CI is set."""
from __future__ import annotations
import ast, base64, fcntl, importlib.util, json, os, queue, re, shutil, subprocess, sys, threading, time, warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "test-output" / "docs"
NOTEBOOKS = sorted(p.name for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRE_FIG_CAPTIONS = True  # set True once every notebook captions its figures (`#| fig-cap:`)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--disable-quic", "--disable-dev-shm-usage",
         "--disable-extensions", "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe"]
WIDTH, HEIGHT, MAX_SHOT = 1280, 900, 16000  # viewport; screenshots are cut at MAX_SHOT px high

spec = importlib.util.spec_from_file_location("render_docs", ROOT / "tools" / "render_docs.py")
render_docs = sys.modules["render_docs"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render_docs)

if not CHROMIUM:
    if os.environ.get("CI"): raise RuntimeError("chromium not found: .ci/run installs Debian's chromium package")
    pytestmark = pytest.mark.skip(reason="chromium not installed (apt-get install chromium)")


class Browser:
    "Headless Chromium driven over the DevTools protocol on a pipe (fds 3/4, NUL-separated JSON)."

    def __init__(self, profile: Path, log: Path, timeout: float = 60):
        to_chrome, from_chrome = os.pipe(), os.pipe()   # (read, write) pairs

        def child():  # runs in the child before exec: chrome reads fd 3, writes fd 4
            r, w = fcntl.fcntl(to_chrome[0], fcntl.F_DUPFD, 100), fcntl.fcntl(from_chrome[1], fcntl.F_DUPFD, 100)
            for fd in (*to_chrome, *from_chrome): os.close(fd)
            os.dup2(r, 3); os.dup2(w, 4); os.close(r); os.close(w)

        self.log = open(log, "wb")
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                                      f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     preexec_fn=child, close_fds=False)
        os.close(to_chrome[0]); os.close(from_chrome[1])
        self.w, self.r, self.timeout = to_chrome[1], from_chrome[0], timeout
        self.next_id, self.replies, self.events, self.lock = 0, {}, queue.Queue(), threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for m in ("Page.enable", "Runtime.enable", "Log.enable"): self.send(m, session=self.session)
        self.send("Emulation.setDeviceMetricsOverride", session=self.session, width=WIDTH, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)

    def _read(self):
        buf = b""
        while True:
            try: chunk = os.read(self.r, 1 << 20)
            except OSError: chunk = b""
            if not chunk:
                with self.lock: self.replies[None] = "closed"; self.lock.notify_all()
                return
            buf += chunk
            *msgs, buf = buf.split(b"\0")
            for raw in msgs:
                msg = json.loads(raw)
                if "id" in msg:
                    with self.lock: self.replies[msg["id"]] = msg; self.lock.notify_all()
                else: self.events.put(msg)

    def send(self, method, session=None, **params):
        with self.lock: self.next_id += 1; i = self.next_id
        msg = {"id": i, "method": method, "params": params}
        if session: msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        with self.lock:
            if not self.lock.wait_for(lambda: i in self.replies or None in self.replies, self.timeout):
                raise TimeoutError(f"chromium did not answer {method} in {self.timeout} s")
            if i not in self.replies: raise RuntimeError(f"chromium exited (see {self.log.name})")
            reply = self.replies.pop(i)
        if "error" in reply: raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def drain(self) -> list:
        out = []
        while True:
            try: out.append(self.events.get_nowait())
            except queue.Empty: return out

    def visit(self, url: str) -> tuple[list, list]:
        "Load `url`; returns (errors, all events) seen until the load event."
        self.drain()
        self.send("Page.navigate", session=self.session, url=url)
        deadline, events = time.monotonic() + self.timeout, []
        while True:
            try: ev = self.events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty: raise TimeoutError(f"{url} did not load in {self.timeout} s")
            events.append(ev)
            if ev.get("method") == "Page.loadEventFired": break
        return events

    def evaluate(self, expr: str):
        r = self.send("Runtime.evaluate", session=self.session, expression=expr, awaitPromise=True,
                      returnByValue=True)
        if "exceptionDetails" in r: raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path: Path):
        h = self.send("Page.getLayoutMetrics", session=self.session)["cssContentSize"]["height"]
        clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(max(h, HEIGHT), MAX_SHOT), "scale": 1}
        data = self.send("Page.captureScreenshot", session=self.session, format="png", clip=clip,
                         captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self):
        try: self.send("Browser.close")
        except Exception: pass
        try: self.proc.wait(10)
        except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        for fd in (self.w, self.r):
            try: os.close(fd)
            except OSError: pass
        self.log.close()


def page_errors(events) -> list[str]:
    "JavaScript exceptions, console errors and failed loads among DevTools events."
    errs = []
    for ev in events:
        m, p = ev.get("method"), ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            errs.append("JS exception: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
            errs.append("console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            errs.append(f"{p['entry']['source']} error: {p['entry']['text']} {p['entry'].get('url', '')}")
    return errs


INSPECT = r"""(async () => {
  await document.fonts.ready;
  const main = document.querySelector('main') || document.body;
  const imgs = [...main.querySelectorAll('img')];
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  const images = imgs.map(i => {
    const b = i.getBoundingClientRect(); let colors = -1, cut = false;
    try {
      if (i.naturalWidth) {
        const c = document.createElement('canvas'), w = c.width = Math.min(96, i.naturalWidth),
              h = c.height = Math.min(96, i.naturalHeight), ctx = c.getContext('2d');
        ctx.drawImage(i, 0, 0, w, h); const d = ctx.getImageData(0, 0, w, h).data, s = new Set();
        for (let k = 0; k < d.length; k += 4) s.add((d[k] << 16) | (d[k + 1] << 8) | d[k + 2]);
        colors = s.size;
        // A truncated or corrupt PNG still "loads": Chromium draws the rows it could decode and leaves the
        // rest transparent. An image with an opaque background (matplotlib's) whose last row is fully
        // transparent was cut off.
        const f = document.createElement('canvas'), W = f.width = i.naturalWidth, H = f.height = i.naturalHeight,
              fx = f.getContext('2d');
        fx.drawImage(i, 0, 0); const top = fx.getImageData(0, 0, 1, 1).data[3], last = fx.getImageData(0, H - 1, W, 1).data;
        let any = false; for (let k = 3; k < last.length; k += 4) if (last[k] > 0) { any = true; break; }
        cut = top === 255 && !any;
      }
    } catch (e) { colors = -2; }
    const fig = i.closest('figure');
    return {src: i.getAttribute('src').slice(0, 40), complete: i.complete, nw: i.naturalWidth, nh: i.naturalHeight,
            w: b.width, h: b.height, colors, cut, caption: fig ? (fig.querySelector('figcaption')?.textContent || '') : ''};
  });
  const math = [...main.querySelectorAll('math')].filter(m => !m.closest('nav#TOC')).map(m => {   // the TOC repeats headings
    const b = m.getBoundingClientRect();
    return {w: b.width, h: b.height, display: getComputedStyle(m).display,
            tex: (m.querySelector('annotation')?.textContent || '').slice(0, 60)};
  });
  const unconverted = [...main.querySelectorAll('span.math')].map(s => s.textContent.slice(0, 80));
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT, {acceptNode: n =>
    n.parentElement.closest('pre, code, math, script, style') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  let text = ''; while (walker.nextNode()) text += walker.currentNode.textContent + ' ';
  const tex_re = /\$\$?[^$\n]{1,80}\$\$?|\\(frac|sqrt|text|mathrm|mathbf|mathcal|sum|prod|cdot|left|right|begin|end|operatorname|times|le|ge|leq|geq|infty|alpha|beta|sin|cos|log|exp|in)\b/g;
  const raw_tex = [...text.matchAll(tex_re)].map(m => m[0]).slice(0, 10);
  const show_docs = [...main.querySelectorAll('div.show-doc')].map(d => ({
    heading: d.querySelector('h1, h2, h3, h4, h5')?.textContent || '', signature: !!d.querySelector('pre'),
    h: d.getBoundingClientRect().height, raw_md: /```|^\s*#{2,4} /m.test(d.innerText)}));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))
    .filter(h => !/^(https?:|mailto:|#|data:|javascript:)/.test(h));
  return {title: document.querySelector('h1.title')?.textContent || '', text_len: main.innerText.length,
          scroll_w: document.documentElement.scrollWidth, images, math, unconverted, raw_tex, show_docs, links};
})()"""


def check_page(page, info, errors, out_dir: Path, unprocessed=()) -> list[str]:
    """Everything wrong with one rendered page, as readable lines (empty when all is well).
    `unprocessed`: pages that nbdev could not process (reported on their own), so links to them are not counted."""
    bad = [f"{page.html}: {e}" for e in errors]
    if not info["title"].strip(): bad.append("no title")
    if info["text_len"] < 100: bad.append(f"page nearly empty ({info['text_len']} characters)")
    if info["scroll_w"] > WIDTH + 2: bad.append(f"page scrolls sideways ({info['scroll_w']} px wide)")
    # figures
    if len(info["images"]) != page.n_images:
        bad.append(f"{page.n_images} figure outputs in the notebook but {len(info['images'])} images on the page")
    for k, im in enumerate(info["images"]):
        if not (im["complete"] and im["nw"] > 0 and im["nh"] > 0):
            bad.append(f"figure {k + 1} did not decode (naturalWidth={im['nw']}, src {im['src']}...)")
        elif im["w"] < 10 or im["h"] < 10: bad.append(f"figure {k + 1} is not visible ({im['w']}x{im['h']} px)")
        elif im["cut"]: bad.append(f"figure {k + 1} is cut off: only its top part decodes (truncated or corrupt PNG)")
        elif 0 <= im["colors"] <= 1: bad.append(f"figure {k + 1} is blank (one colour)")
    # math
    if info["unconverted"]: bad.append(f"formulas Pandoc could not convert, shown as TeX: {info['unconverted'][:5]}")
    if info["raw_tex"]: bad.append(f"TeX left in the text (math not rendered): {info['raw_tex']}")
    if len(info["math"]) != page.n_math:
        bad.append(f"{page.n_math} formulas in the source but {len(info['math'])} rendered as MathML")
    for m in info["math"]:
        if "math" not in m["display"] or m["w"] <= 0 or m["h"] <= 0:
            bad.append(f"formula not laid out as MathML (display={m['display']}, {m['w']}x{m['h']}): {m['tex']}")
    bad += [f"pandoc: {w}" for w in page.pandoc_warnings]
    # show_doc
    if len(info["show_docs"]) != len(page.show_docs):
        bad.append(f"{len(page.show_docs)} show_doc cells but {len(info['show_docs'])} blocks on the page")
    for name, d in zip(page.show_docs, info["show_docs"]):
        short = name.split(".")[-1]
        if short not in d["heading"]: bad.append(f"show_doc({name}) block has heading {d['heading']!r}")
        if not d["signature"]: bad.append(f"show_doc({name}) block has no signature")
        if d["raw_md"]: bad.append(f"show_doc({name}) shows raw Markdown")
        if d["h"] < 20: bad.append(f"show_doc({name}) block is not visible")
    # links between pages
    for href in info["links"]:
        target = href.split("#")[0]
        if target and target not in unprocessed and not (out_dir / target).exists(): bad.append(f"broken link: {href}")
    return bad


def cells_run_by_docs(nb_path: Path) -> list[str]:
    """Code cells that nbdev runs when it builds the docs although they are neither exported nor pure imports:
    nbdev runs every cell containing an import (its FAQ), so a test cell with an import in it runs at docs time
    (slowly, or failing for lack of the state its earlier cells would have made). First lines, numbered."""
    out = []
    for i, c in enumerate(json.loads(nb_path.read_text(encoding="utf-8"))["cells"]):
        if c["cell_type"] != "code": continue
        src = "".join(c["source"]); lines = src.splitlines()
        dirs = {re.split(r"[\s:]", l[2:].strip(), maxsplit=1)[0] for l in lines if l.startswith("#|")}
        if {"export", "exports", "exporti", "exec_doc"} & dirs or re.search(r"^#\|\s*eval:\s*false", src, re.M): continue
        code = "\n".join(l for l in lines if not l.startswith(("#|", "%", "!")))
        try: tree = ast.parse(code)
        except SyntaxError: continue
        if not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)): continue
        if all(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               for n in tree.body): continue
        out.append(f"cell {i}: {code.strip().splitlines()[0][:70]}")
    return out


def _proc_error(err: str) -> list[str]:
    "The useful lines of nbdev-proc-nbs's error output."
    lines = [l for l in err.strip().splitlines() if l.strip() and not set(l.strip()) <= set("^~")]
    at = [i for i, l in enumerate(lines) if "Error in notebook" in l]
    if at: return lines[at[-1]:][:30]                      # a cell failed: its source and the error
    m = re.search(r'Traceback \(most recent call last\):\n(.*?)\n"""', err, re.S)  # nbdev itself failed
    return [l for l in (m[1] if m else err).strip().splitlines() if l.strip()][-6:]


def proc_and_render(nbs_dir: Path, work: Path) -> tuple[list, Path, dict]:
    """Copy the project's nbdev inputs to `work`, run nbdev-proc-nbs there, render the processed notebooks.
    Returns (pages, the _proc folder, {notebook: last lines of the error} for notebooks nbdev could not process)."""
    proj = work / "proj"
    ign = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "_proc", "_docs")
    shutil.copytree(nbs_dir, proj / "nbs", ignore=ign)
    shutil.copytree(ROOT / "annotated_transformer", proj / "annotated_transformer", ignore=ign)
    for f in ("pyproject.toml", "README.md"): shutil.copy2(ROOT / f, proj / f)
    env = dict(os.environ, MPLBACKEND="Agg")
    # Pages are built from the notebooks' saved outputs: nbdev runs only import, exported and show_doc cells, none of
    # which needs data (tests/test_docs_build.py checks it with no data root, no cache and no network). The data root
    # is $ANNOTATED_TRANSFORMER_DATA or nothing, and a download attempt fails at once instead of fetching Multi30k.
    env.setdefault("ANNOTATED_TRANSFORMER_DATA_URL", "file:///nonexistent/")
    if not shutil.which("quarto"):  # nbdev-proc-nbs only checks Quarto is there (else it tries to download it)
        stub = work / "bin"; stub.mkdir()
        (stub / "quarto").write_text("#!/bin/sh\necho 'quarto: stub for tests/test_docs_render.py' >&2\nexit 0\n")
        (stub / "quarto").chmod(0o755)
        env["PATH"] = f"{stub}{os.pathsep}{env['PATH']}"
    exe = Path(sys.executable).parent / "nbdev-proc-nbs"
    run = lambda *a: subprocess.run([str(exe), *a], cwd=proj, env=env, capture_output=True, text=True, timeout=600)
    r, errors, proc = run("--n-workers", "2"), {}, proj / "_proc"
    assert "Quarto is not installed" not in r.stdout, r.stdout
    if r.returncode:  # one notebook failed (and stopped the others): process the missing ones one by one
        for nb in NOTEBOOKS:
            if not (proc / nb).exists() and (r1 := run("--file-glob", nb, "--n-workers", "1")).returncode:
                errors[nb] = _proc_error(r1.stderr)
        assert errors, f"nbdev-proc-nbs failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    names = [nb for nb in NOTEBOOKS if (proc / nb).exists()]
    return render_docs.render_site(proc, work / "html", names), proc, errors


def browse(pages, html_dir: Path, shots: Path | None, work: Path, unprocessed=()) -> dict:
    "Open every page in headless Chromium: {notebook: problems}; screenshots to `shots`."
    if shots: shots.mkdir(parents=True, exist_ok=True)
    b, res = Browser(work / "chromium-profile", work / "chromium.log"), {}
    try:
        for p in pages:
            events = b.visit((html_dir / p.html).as_uri())
            info = b.evaluate(INSPECT)
            time.sleep(0.1)  # late console errors
            errors = page_errors(events + b.drain())
            res[p.notebook] = (check_page(p, info, errors, html_dir, unprocessed), info)
            if shots: b.screenshot(shots / (Path(p.notebook).stem + ".png"))
    finally: b.close()
    return res


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("docs")
    t0 = time.monotonic()
    pages, proc, proc_errors = proc_and_render(ROOT / "nbs", work)
    t1 = time.monotonic()
    html_dir = OUT / "html"
    if html_dir.exists(): shutil.rmtree(html_dir)
    shutil.copytree(work / "html", html_dir)
    if (OUT / "screenshots").exists(): shutil.rmtree(OUT / "screenshots")
    unprocessed = {re.sub(r"^\d+_", "", Path(nb).stem) + ".html" for nb in proc_errors}
    res = browse(pages, html_dir, OUT / "screenshots", work, unprocessed)
    print(f"\ndocs render: nbdev-proc-nbs + pandoc {t1 - t0:.1f} s, chromium {time.monotonic() - t1:.1f} s, "
          f"{len(pages)} pages -> {OUT}")
    return {p.notebook: p for p in pages}, res, proc, proc_errors


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_page_renders(site, nb):
    pages, res, _, proc_errors = site
    if nb in proc_errors:
        pytest.fail(f"nbdev-proc-nbs failed on {nb} (it runs show_doc cells, exported cells and every cell that "
                    "contains an import: keep imports in the notebook's import cell):\n  " + "\n  ".join(proc_errors[nb])
                    + "".join(f"\n  nbdev runs {c}" for c in cells_run_by_docs(ROOT / "nbs" / nb)))
    assert nb in pages, f"{nb} was not processed by nbdev-proc-nbs"
    problems, info = res[nb]
    assert not problems, f"{nb} -> {pages[nb].html}:\n  " + "\n  ".join(problems)
    p = pages[nb]
    if run := cells_run_by_docs(ROOT / "nbs" / nb):
        warnings.warn(f"{nb}: nbdev runs these cells when building the docs because they contain an import; "
                      f"move the imports to the import cell: {run}")
    if p.long_unfolded:
        warnings.warn(f"{nb}: long code cells shown unfolded (add `#| code-fold: true`): {p.long_unfolded}")
    if p.n_images > p.n_captions:
        msg = f"{nb}: {p.n_images - p.n_captions} of {p.n_images} figures have no caption (`#| fig-cap:`)"
        if REQUIRE_FIG_CAPTIONS: pytest.fail(msg)
        warnings.warn(msg)


def test_sidebar_lists_every_notebook_in_order(site):
    "sidebar.yml names only notebooks that exist, each once, every notebook, the home page first."
    proc = site[2]
    listed = [nb for _, nb, _ in render_docs.load_sidebar(proc)]
    missing = [nb for nb in listed if not (ROOT / "nbs" / nb).exists()]
    assert not missing, f"nbs/sidebar.yml lists notebooks that do not exist: {missing}"
    assert len(listed) == len(set(listed)), f"nbs/sidebar.yml lists a notebook twice: {listed}"
    assert sorted(listed) == NOTEBOOKS, f"notebooks missing from nbs/sidebar.yml: {sorted(set(NOTEBOOKS) - set(listed))}"
    assert listed[0] == "index.ipynb", f"the home page (index.ipynb) comes first in nbs/sidebar.yml: {listed}"
    chapters = listed[1:]
    if chapters != sorted(chapters): warnings.warn(f"nbs/sidebar.yml is not in notebook (= paper) order: {chapters}")


def test_solutions_are_folded_and_pages_link_to_their_notebooks(site):
    """Each exercise's solution is a closed <details> titled `Solution CC.N` (Quarto's collapsed callout); each page
    links to its notebook on GitHub and to Colab."""
    html = (OUT / "html" / "attention.html").read_text(encoding="utf-8")
    folds = re.findall(r'<details class="callout-tip"( open)?><summary>(Solution 02\.\d)</summary>', html)
    assert [t for _, t in folds] == ["Solution 02.1", "Solution 02.2", "Solution 02.3", "Solution 02.4"], folds
    assert not any(o for o, _ in folds), "a solution is unfolded"
    assert 'href="https://colab.research.google.com/github/annotated-transformer/annotated_transformer/blob/main/nbs/02_attention.ipynb"' in html
    assert 'href="https://github.com/annotated-transformer/annotated_transformer/blob/main/nbs/02_attention.ipynb"' in html


def test_quarto_config_parses(site):
    "The YAML that Quarto reads (as nbdev-proc-nbs leaves it) parses, and names what the site needs."
    import yaml
    proc = site[2]
    cfg = {f: yaml.safe_load((proc / f).read_text(encoding="utf-8")) for f in ("_quarto.yml", "nbdev.yml", "sidebar.yml")}
    q = cfg["_quarto.yml"]
    assert q["project"]["type"] == "website" and set(q["metadata-files"]) == {"nbdev.yml", "sidebar.yml"}
    html = q["format"]["html"]
    assert html["toc"] and html["code-tools"] and "fig-cap-location" in html and "html-math-method" in html
    assert q["website"]["page-navigation"], "prev/next links between chapters"
    assert cfg["nbdev.yml"]["website"]["title"]


BROKEN_NB = {"cells": [
    {"cell_type": "raw", "metadata": {}, "source": "---\ntitle: Broken on purpose\noutput-file: broken.html\n---"},
    {"cell_type": "markdown", "metadata": {}, "source": "Good $\\frac{a}{b}$, unknown macro $\\fracc{a}{b}$.\n\n"
     "A sentence of prose long enough for the page not to count as empty, about attention and heads."},
    {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "#| fig-cap: \"fine\"\nplot()", "outputs": [
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": "GOOD", "text/plain": "<Figure>"}}]},
    {"cell_type": "code", "metadata": {}, "execution_count": 2, "source": "plot()", "outputs": [
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"
                                                                 "CAYAAAAfFcSJAAAAD", "text/plain": "<Figure>"}}]},
    {"cell_type": "code", "metadata": {}, "execution_count": 3, "source": "plot()", "outputs": [
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": "HALF", "text/plain": "<Figure>"}}]}],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_checks_catch_a_broken_figure_and_formula(tmp_path):
    "The checks are not vacuous: broken PNGs (no header; cut in half) and a formula Pandoc cannot convert are reported."
    import io, matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1.5)); ax.plot([0, 1], [1, 0]); ax.set_title("ok")
    buf = io.BytesIO(); fig.savefig(buf, format="png"); plt.close(fig)
    good = base64.b64encode(buf.getvalue()).decode()
    nb = json.loads(json.dumps(BROKEN_NB).replace("GOOD", good).replace("HALF", good[:len(good) // 2]))
    proc = tmp_path / "proc"; proc.mkdir()
    (proc / "broken.ipynb").write_text(json.dumps(nb))
    pages = render_docs.render_site(proc, tmp_path / "html")
    problems, info = browse(pages, tmp_path / "html", None, tmp_path)["broken.ipynb"]
    text = "\n".join(problems)
    assert info["images"][0]["nw"] > 0 and info["images"][0]["caption"] == "fine", info["images"]
    assert "figure 2 did not decode" in text and "figure 3 is cut off" in text and "figure 1" not in text, text
    assert "could not convert" in text and "fracc" in text, text
    assert len(info["math"]) == 1, info["math"]   # the good formula is rendered
