"""In-browser translator (chapter 35, web/): the rendered chapter page served on 127.0.0.1, both shipped models exported by
`annotated-transformer export --format onnx`, run by onnxruntime-web (WASM) in headless Chromium (Playwright, Debian's
/usr/bin/chromium; no browser download) against the Python package: the same greedy and beam-4 ids (a difference only
at a near-tie), the same cross-attention within 1e-4, keyboard-only use, a message without WebAssembly. Timings and
download sizes are printed, not asserted."""
import functools, gzip, http.server, importlib.util, json, math, os, shutil, subprocess, sys, threading, time
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    if os.environ.get("CI"): pytest.fail(f"CI is set but {CHROMIUM} is missing", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download: "
                                     "it drives /usr/bin/chromium)")
import torch

from annotated_transformer.decoding import length_normalization
from annotated_transformer.decoding import SearchOptions
from annotated_transformer.fast_decoding import fast_beam_search
from annotated_transformer.fast_model import make_fast
from annotated_transformer.embeddings import BOS_IDX, EOS_IDX
from annotated_transformer.evaluation import decode_corpus, encode_sources, translate_with_model

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "web"
SHOT_DIR = ROOT / "test-output" / "browser"
N_SENTENCES, MIN_SAME = 20, 19
LOGP_MARGIN = 1e-3      # a divergence is allowed only where Python's two best candidates are this close
ATTN_TOL = 1e-4
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]
torch.set_num_threads(2)


# ---------------------------------------------------------------- the served folder
def build_bundle(out: Path) -> Path:
    "`npm ci` + `npm run build` into `out` (node on PATH); else a prebuilt web/dist; else skip."
    if shutil.which("npm") and shutil.which("node"):
        if not (WEB / "node_modules" / ".package-lock.json").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=WEB, check=True)
        r = subprocess.run(["npm", "run", "build", "--", str(out)], cwd=WEB, capture_output=True, text=True)
        if r.returncode: pytest.fail(f"npm run build failed:\n{r.stdout}\n{r.stderr}")
    elif (WEB / "dist" / "translate.js").exists():
        shutil.copytree(WEB / "dist", out, dirs_exist_ok=True)
    else: pytest.skip("neither node/npm nor a prebuilt web/dist/")
    return out


def export_models(models: Path, directions=("de-en", "en-de")) -> None:
    "Each shipped direction exported by the command line into `models/<pair>/`, as the deploy workflow does."
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    for d in directions:
        r = subprocess.run([sys.executable, "-m", "annotated_transformer", "export", "--format", "onnx",
                            "--model", d, "--output", str(models / d)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]


def write_page(site: Path) -> str:
    "Chapter 35 rendered by tools/render_docs.py (Pandoc, as the docs test does) into `site`; its file name."
    spec = importlib.util.spec_from_file_location("render_docs", ROOT / "tools" / "render_docs.py")
    render_docs = sys.modules.setdefault("render_docs", importlib.util.module_from_spec(spec))
    if not hasattr(render_docs, "render_site"): spec.loader.exec_module(render_docs)
    pages = render_docs.render_site(ROOT / "nbs", site, ["35_onnx_export.ipynb"])
    return pages[0].html


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "The served folder, the server on 127.0.0.1, and the page URL."
    root = tmp_path_factory.mktemp("site")
    page = write_page(root)                       # (with render_docs' stub bundle in browser/)
    build_bundle(root / "browser")                # the real bundle over it
    export_models(root / "browser" / "models")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/{page}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def loaded(site, browser):
    "One page in a fresh (cold-cache) context that has translated a first sentence; the cold-start numbers."
    _, url = site
    ctx = browser.new_context()
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    t0 = time.perf_counter()
    page.goto(url)
    res = ui_translate(page, sentences()[0][0], beam=1)
    cold = time.perf_counter() - t0
    info = page.evaluate("""() => ({app: window.atTranslate.stats.bytes,
        res: performance.getEntriesByType('resource').reduce((s, e) => s + (e.transferSize || e.encodedBodySize || 0), 0),
        nav: performance.getEntriesByType('navigation').reduce((s, e) => s + (e.transferSize || 0), 0)})""")
    print(f"\n[browser] cold start to first translation: {cold:.2f} s; downloaded: {info['res'] + info['nav']} bytes "
          f"(resources {info['res']}, page {info['nav']}; fetched by the translator {info['app']})")
    yield page, res, errors
    ctx.close()


# ---------------------------------------------------------------- the page, driven
def ui_translate(page, text: str, beam: int = 1, timeout: float = 180_000, direction: str = "de-en") -> dict:
    "Type `text` into the textarea, pick direction and search, press Enter; the page's result (window.atTranslate.last)."
    page.wait_for_selector("#at-tr-input")
    page.select_option("#at-tr-dir", direction)
    page.select_option("#at-tr-search", str(beam))
    before = page.evaluate("() => window.atTranslate.last ? window.atTranslate.last.ms + ':' + window.atTranslate.last.text : null")
    page.fill("#at-tr-input", text)
    page.press("#at-tr-input", "Enter")
    page.wait_for_function("(b) => { const l = window.atTranslate.last, r = document.getElementById('at-translate');"
                           " return r.dataset.state === 'error' || (r.dataset.state === 'ready' && l && (l.ms + ':' + l.text) !== b); }",
                           arg=before, timeout=timeout)
    state = page.get_attribute("#at-translate", "data-state")
    assert state == "ready", page.inner_text(".at-status")
    return page.evaluate("() => { const l = window.atTranslate.last; return {text: l.text, ids: l.ids, outIds: l.outIds,"
                         " srcIds: l.srcIds, ms: l.ms, score: l.score, steps: l.steps,"
                         " output: document.getElementById('at-tr-output').textContent}; }")


# ---------------------------------------------------------------- the Python side
@functools.lru_cache(None)
def sentences(direction: str = "de-en") -> list[tuple[str, str]]:
    "The first validation pairs (source, reference) of a direction."
    data = os.environ.get("ANNOTATED_TRANSFORMER_DATA")
    folder = Path(data or "/nonexistent") / "multi30k"
    if not (folder / "val.de.gz").exists(): pytest.skip("no Multi30k validation set ($ANNOTATED_TRANSFORMER_DATA)")
    read = lambda lang: gzip.open(folder / f"val.{lang}.gz", "rt", encoding="utf-8").read().splitlines()[:N_SENTENCES]
    s, t = direction.split("-")
    return list(zip(read(s), read(t)))


@functools.lru_cache(None)
def python_model(direction: str):
    from annotated_transformer.pretrained import load_model
    model, codec, _ = load_model(direction)
    return make_fast(model).eval(), codec                  # as the command line decodes


@pytest.fixture(scope="module")
def reference(): return python_model("de-en")


@torch.no_grad()
def teacher_forced(model, src_ids: list[int], tgt_in: list[int], record: bool = False):
    "Log-probs (tgt_len, vocab) of each next token after `tgt_in` (BOS first); with `record`, every layer's attention."
    src = torch.tensor([src_ids]); tgt = torch.tensor([tgt_in])
    src_mask = (src != 0)[:, None, None, :]
    tgt_mask = torch.tril(torch.ones(len(tgt_in), len(tgt_in), dtype=torch.bool))[None, None]
    mods = [l.src_attn for l in model.decoder.layers] + [l.self_attn for l in model.decoder.layers] + \
           [l.self_attn for l in model.encoder.layers]
    for m in mods: m.record_weights = record
    try:
        h = model.decode(model.encode(src, src_mask), src_mask, tgt, tgt_mask)
        logp = model.generator(h)[0].float()
        attn = {k: [l.attn_weights[0].clone() for l in ls] for k, ls in
                (("cross", [l.src_attn for l in model.decoder.layers]), ("decoder", [l.self_attn for l in model.decoder.layers]),
                 ("encoder", [l.self_attn for l in model.encoder.layers]))} if record else None
    finally:
        for m in mods: m.record_weights, m.attn_weights = False, None
    return logp, attn


def hyp_score(model, src_ids, hyp: list[int], alpha: float = 0.6) -> float:
    "A hypothesis's (ids incl. its EOS) normalised score logP / lp(|Y|), teacher-forced with PyTorch."
    logp, _ = teacher_forced(model, src_ids, [BOS_IDX] + hyp[:-1])
    return float(logp[torch.arange(len(hyp)), torch.tensor(hyp)].double().sum()) / length_normalization(len(hyp), alpha)


def with_eos(ids: list[int], limit: int) -> list[int]:
    return ids + [EOS_IDX] if len(ids) < limit else ids


def compare(model, codec, page_results, beam: int, direction: str = "de-en") -> tuple[int, list[str]]:
    "Page ids vs the Python package's (`decode_corpus`, as `translate` runs it); every divergence explained or listed."
    srcs = [s for s, _ in sentences(direction)]
    src_ids, _ = encode_sources(codec, srcs, model.config.max_len)
    py_ids = decode_corpus(model, src_ids, SearchOptions(beam_size=beam), fast_beam_search)
    py_text = translate_with_model(model, codec, srcs, SearchOptions(beam_size=beam), fast_beam_search)
    same, problems = 0, []
    for i, (r, ids, text, sids) in enumerate(zip(page_results, py_ids, py_text, src_ids)):
        assert r["srcIds"] == sids, (i, "tokenizer differs", r["srcIds"], sids)
        if r["ids"] == ids:
            same += 1
            assert r["text"] == text == r["output"], (i, r["text"], text)
            continue
        limit = min(len(sids) + 50, model.config.max_len)
        mine, theirs = r["outIds"], with_eos(ids, limit)
        if beam == 1:   # the parting step: Python's two best next tokens must be (nearly) tied
            t = next(k for k, (a, b) in enumerate(zip(mine + [-1], theirs + [-1])) if a != b)
            logp, _ = teacher_forced(model, sids, [BOS_IDX] + theirs[:t])
            top = logp[-1].double().topk(2)
            gap = float(top.values[0] - top.values[1])
            why = f"step {t + 1}: Python's two best {top.indices.tolist()} log-probs {top.values.tolist()} (gap {gap:.2e})"
            ok = gap <= LOGP_MARGIN and {mine[t], theirs[t]} <= set(top.indices.tolist())
        else:           # both final hypotheses score (nearly) the same under PyTorch
            a, b = hyp_score(model, sids, mine), hyp_score(model, sids, theirs)
            gap, why = abs(a - b), f"PyTorch scores page {a:.6f} vs Python {b:.6f}"
            ok = gap <= LOGP_MARGIN
        print(f"[browser] beam {beam} sentence {i}: differs ({why}):\n  page:   {r['text']}\n  python: {text}")
        if not ok: problems.append(f"sentence {i}: {why}")
    return same, problems


# ---------------------------------------------------------------- tests
def test_greedy_matches_python(loaded, reference):
    "20 validation sentences typed into the page, greedy: the Python package's ids on ≥ 19, near-ties where not."
    page, first, errors = loaded
    results, times = [first], []
    for src, _ in sentences()[1:]:
        results.append(ui_translate(page, src, beam=1))
        times.append(results[-1]["ms"])
    same, problems = compare(*reference, results, beam=1)
    print(f"[browser] greedy: {same}/{len(results)} identical ids; per-sentence latency (warm) mean "
          f"{sum(times) / len(times):.0f} ms, max {max(times):.0f} ms")
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT_DIR / "translate.png"), full_page=True)
    assert not errors, errors
    assert same >= MIN_SAME and not problems, problems


def test_beam_matches_python(loaded, reference):
    "The same sentences with beam 4: the Python package's ids on ≥ 19, equal PyTorch scores where not."
    page, _, _ = loaded
    results = [ui_translate(page, src, beam=4) for src, _ in sentences()]
    same, problems = compare(*reference, results, beam=4)
    times = [r["ms"] for r in results]
    print(f"[browser] beam 4: {same}/{len(results)} identical ids; per-sentence latency mean "
          f"{sum(times) / len(times):.0f} ms, max {max(times):.0f} ms")
    assert same >= MIN_SAME and not problems, problems


def test_attention_matches_pytorch(loaded, reference):
    "One sentence's cross-attention (and encoder and decoder self-attention), every layer and head, within 1e-4 of PyTorch's."
    page, _, _ = loaded
    model, _ = reference
    ui_translate(page, sentences()[3][0], beam=1)
    r = page.evaluate("() => { const l = window.atTranslate.last; return {srcIds: l.srcIds, outIds: l.outIds, attention: l.attention}; }")
    _, attn = teacher_forced(model, r["srcIds"], [BOS_IDX] + r["outIds"][:-1], record=True)
    for kind in ("cross", "decoder", "encoder"):
        mine = torch.tensor(r["attention"][kind])               # (layers, heads, q, k)
        theirs = torch.stack(attn[kind]).float()
        assert mine.shape == theirs.shape, (kind, mine.shape, theirs.shape)
        err = float((mine - theirs).abs().max())
        print(f"[browser] {kind} attention: max |page - PyTorch| = {err:.2e} over {tuple(mine.shape)}")
        assert err <= ATTN_TOL, (kind, err)
    assert len(r["attention"]["srcTokens"]) == len(r["srcIds"])
    assert page.locator(".at-maps canvas").count() == 3
    page.select_option("#at-tr-head", "mean"); page.select_option("#at-tr-layer", "0")
    assert page.locator(".at-maps canvas").count() == 3
    # one numbering for the book: layers and heads from 0, as chapter 37's figures and the `attention` command count them
    n_layers = len(r["attention"]["cross"])
    assert page.locator("#at-tr-layer option").all_inner_texts() == [str(i) for i in range(n_layers)]
    assert page.locator("#at-tr-head option").all_inner_texts()[1:2] == ["0"]
    page.select_option("#at-tr-head", "0")
    assert "layer 0, head 0" in page.locator(".at-maps canvas").first.get_attribute("aria-label")


def test_blank_and_over_long_input_as_the_package(loaded, reference):
    "A blank box gives "" without running the model, as the package gives "" for a blank line; the page cuts an over-long"
    " sentence where the package does, with the package's words (issue 42)."
    page, _, _ = loaded
    model, codec = reference
    assert translate_with_model(model, codec, ["   "], search=fast_beam_search) == [""]
    bytes_before = page.evaluate("() => window.atTranslate.stats.bytes")
    for text in ("", "   \n\t"):
        r = page.evaluate("(t) => window.atTranslate.translate(t)", text)
        assert r["text"] == "" and r["blank"], r
        assert page.locator("#at-tr-output").inner_text() == ""
        assert "Nothing to translate" in page.inner_text(".at-status")
        assert page.locator(".at-attention").is_hidden()
    assert page.evaluate("() => window.atTranslate.stats.bytes") == bytes_before      # nothing fetched, nothing run
    long = " ".join(["Ein Mann fährt mit dem Fahrrad durch die Stadt."] * 200)         # about 2,400 source tokens
    ids, cut = encode_sources(codec, [long], model.config.max_len)
    assert cut == [0] and len(ids[0]) == model.config.max_len
    r = page.evaluate("(t) => window.atTranslate.encode(t, 'de-en')", long)          # (translating it takes minutes)
    assert r["cut"] and r["ids"] == ids[0]                                            # the same ids as the package's
    # the message and the heatmaps' size: tests/test_nothing_lost.py runs web/src/input.js under node


def test_keyboard_only(site, browser):
    "Tab to the textarea, type, press Enter: the translation appears (no mouse)."
    _, url = site
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_selector("#at-tr-input")
    for _ in range(400):   # past the book's sidebar and contents, as a keyboard user goes
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement && document.activeElement.id") == "at-tr-input": break
    else: pytest.fail("Tab never reaches the textarea")
    for sel in ("#at-tr-input", "#at-tr-dir", "#at-tr-search"):   # every control has a label
        assert page.locator(f"label[for='{sel[1:]}']").count() == 1, sel
    page.keyboard.type("Ein Hund rennt über eine Wiese.")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('at-tr-output').textContent.trim().length > 0", timeout=180_000)
    print(f"[browser] keyboard: {page.inner_text('#at-tr-output')!r}")
    assert page.get_attribute("#at-translate", "data-state") == "ready"
    ctx.close()


def test_lazy_and_no_webassembly(site, browser):
    "Nothing heavy is fetched before Translate; without WebAssembly the page says so instead of failing."
    _, url = site
    ctx = browser.new_context()
    page = ctx.new_page()
    urls = []
    page.on("request", lambda q: urls.append(q.url))
    page.goto(url); page.wait_for_selector("#at-tr-input"); page.wait_for_timeout(300)
    assert not [u for u in urls if u.endswith((".onnx", ".bin", ".gz", "tokenizer.json"))], urls
    ctx.close()
    ctx = browser.new_context()
    ctx.add_init_script("delete window.WebAssembly;")
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("#at-translate[data-state='error']")
    msg = page.inner_text("#at-translate")
    assert "WebAssembly" in msg and not errors, (msg, errors)
    ctx.close()


def test_missing_direction_says_so(site, browser):
    "A direction whose models are missing on the server ends in a clear error, not a hang."
    root, url = site
    models = root / "browser" / "models"
    (models / "en-de").rename(models / "en-de.away")
    try:
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(url)
        page.select_option("#at-tr-dir", "en-de")
        page.fill("#at-tr-input", "A dog runs.")
        page.press("#at-tr-input", "Enter")
        page.wait_for_selector("#at-translate[data-state='error']", timeout=60_000)
        assert "404" in page.inner_text(".at-status")
        ctx.close()
    finally: (models / "en-de.away").rename(models / "en-de")


def test_divergence_check_catches_a_real_difference(reference):
    "The divergence rule itself: a greedy path that leaves Python's argmax where it is no tie is reported."
    model, codec = reference
    src_ids, _ = encode_sources(codec, [s for s, _ in sentences()], model.config.max_len)
    py = decode_corpus(model, src_ids, SearchOptions(beam_size=1), fast_beam_search)
    fake = []
    for sids, ids in zip(src_ids, py):
        out = with_eos(ids, min(len(sids) + 50, model.config.max_len))
        fake.append({"srcIds": sids, "ids": ids, "outIds": out, "text": codec.tgt_text(ids),
                     "output": codec.tgt_text(ids)})
    logp, _ = teacher_forced(model, src_ids[0], [BOS_IDX])
    second = int(logp[-1].topk(2).indices[1])
    fake[0] = {**fake[0], "ids": [second], "outIds": [second, EOS_IDX], "text": "?", "output": "?"}
    same, problems = compare(model, codec, fake, beam=1)
    assert same == len(fake) - 1 and len(problems) == 1 and problems[0].startswith("sentence 0: step 1")


@pytest.mark.parametrize("beam", [1, 4])
def test_en_de_matches_python(loaded, beam):
    "The other direction, en→de: the same 20-sentence rule, greedy and beam 4."
    page, _, errors = loaded
    results = [ui_translate(page, src, beam=beam, direction="en-de") for src, _ in sentences("en-de")]
    same, problems = compare(*python_model("en-de"), results, beam=beam, direction="en-de")
    times = [r["ms"] for r in results]
    print(f"[browser] en-de beam {beam}: {same}/{len(results)} identical ids; per-sentence latency mean "
          f"{sum(times) / len(times):.0f} ms, max {max(times):.0f} ms")
    assert not errors, errors
    assert same >= MIN_SAME and not problems, problems


@pytest.mark.skipif(not os.environ.get("ANNOTATED_TRANSFORMER_BROWSER_FULL"),
                    reason="the whole validation set in the browser: set ANNOTATED_TRANSFORMER_BROWSER_FULL=1 (minutes)")
def test_whole_validation_set(loaded):
    "All 1,014 validation sentences per direction through the page's API: identical ids and BLEU against Python (a report)."
    from annotated_transformer.evaluation import corpus_bleu
    from annotated_transformer.runtime import hardware_summary
    page, _, _ = loaded
    data = Path(os.environ["ANNOTATED_TRANSFORMER_DATA"]) / "multi30k"
    read = lambda lang: gzip.open(data / f"val.{lang}.gz", "rt", encoding="utf-8").read().splitlines()
    rows = []
    for direction in ("de-en", "en-de"):
        s, t = direction.split("-")
        srcs, refs = read(s), read(t)
        model, codec = python_model(direction)
        src_ids, _ = encode_sources(codec, srcs, model.config.max_len)
        for beam in (1, 4):
            t0 = time.perf_counter()
            out = page.evaluate("async ([xs, d, b]) => { const r = []; for (const x of xs) {"
                                " const o = await window.atTranslate.translate(x, {direction: d, beam: b});"
                                " r.push([o.text, o.ids]); } return r; }", [srcs, direction, beam])
            seconds = time.perf_counter() - t0
            py = decode_corpus(model, src_ids, SearchOptions(beam_size=beam), fast_beam_search)
            rows.append({"direction": direction, "beam": beam, "sentences": len(srcs),
                         "identical": sum(o[1] == p for o, p in zip(out, py)),
                         "bleu_browser": round(corpus_bleu([o[0] for o in out], refs).score, 2),
                         "bleu_python": round(corpus_bleu([codec.tgt_text(p) for p in py], refs).score, 2),
                         "browser_ms_per_sentence": round(1000 * seconds / len(srcs), 1)})
            print(f"[browser] {rows[-1]}")
    env = hardware_summary(as_dict=True)
    result = {"command": "ANNOTATED_TRANSFORMER_BROWSER_FULL=1 pytest -s tests/test_browser_translate.py -k whole",
              "environment": {"cpu": env["cpu"], "capability": env["capability"],
                              "browser": page.context.browser.version, "wasm_threads": 1},
              "rows": rows}
    (ROOT / "nbs" / "results" / "browser_agreement.json").write_text(json.dumps(result, indent=1) + "\n")
    for r in rows: assert abs(r["bleu_browser"] - r["bleu_python"]) <= 0.5, r
