"""The translator page's layout and look (chapter 35, web/src/translate.css), in headless Chromium (Playwright, Debian's
/usr/bin/chromium) on the chapter rendered as tests/test_browser_translate.py renders and serves it: a long sentence's
attention maps stay inside the window, each scrolling in its own box, the cross-attention map reachable to its last
row and column; at a desktop's and at a phone's width no horizontal page scroll, the controls within the window, and
the book's font and form controls rather than the browser's. Screenshots go to test-output/web/ (git-ignored)."""
import functools, http.server, threading

import pytest

from test_browser_translate import (ROOT, _Quiet, browser, build_bundle, export_models,  # noqa: F401 (browser: a fixture)
                                    ui_translate, write_page)

SHOTS = ROOT / "test-output" / "web"
SHORT = "Ein Mann fährt mit dem Fahrrad durch die Stadt."
LONG = " ".join([SHORT] * 40)              # about 400 source tokens: 18-pixel cells, maps over 7,000 px a side
DESKTOP, PHONE = (1280, 900), (390, 844)
# The Pandoc preview folds its sidebar below 992 px, as the site (Quarto) does: at a phone's width the page has it all.


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "Chapter 35 rendered with the real bundle and the de-en export, served on 127.0.0.1: the page's URL."
    root = tmp_path_factory.mktemp("web-site")
    page = write_page(root)
    build_bundle(root / "browser")
    export_models(root / "browser" / "models", ("de-en",))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{page}"
    server.shutdown()


@pytest.fixture
def open_page(site, browser):
    "A page at a window size, in its own context (closed after the test); the sidebar folded below 992 px."
    contexts = []
    def open_(size):
        ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
        contexts.append(ctx)
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(site)
        page.wait_for_selector("#at-tr-input")
        return page, errors
    yield open_
    for c in contexts: c.close()


def shot(page, name: str):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#at-translate").screenshot(path=str(SHOTS / name))


MEASURE = """() => {
  const r = (e) => { const b = e.getBoundingClientRect(); return {left: b.left, right: b.right, top: b.top,
                                                                   bottom: b.bottom, width: b.width}; };
  const maps = [...document.querySelectorAll('.at-maps canvas')].map(c => {
    const box = c.closest('.at-map-box') || c.parentElement;
    return {kind: c.dataset.kind, canvas: r(c), box: r(box), scrollable: getComputedStyle(box).overflowX,
            boxScrollWidth: box.scrollWidth, boxScrollHeight: box.scrollHeight};
  });
  return {innerWidth, scrollWidth: document.documentElement.scrollWidth, maps};
}"""


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280px", "390px"])
def test_long_sentence_maps_fit_the_window(open_page, size):
    "A sentence of about 400 tokens: the page is no wider than the window; every map scrolls inside a box within it,"
    " and the cross-attention map scrolls to its last column and row."
    page, errors = open_page(size)
    ui_translate(page, LONG)
    m = page.evaluate(MEASURE)
    shot(page, f"long-{size[0]}.png")
    assert m["scrollWidth"] <= m["innerWidth"], f"the page is {m['scrollWidth']} px wide in a {m['innerWidth']} px window"
    assert {x["kind"] for x in m["maps"]} == {"encoder", "decoder", "cross"}
    for x in m["maps"]:
        assert 0 <= x["box"]["left"] and x["box"]["right"] <= m["innerWidth"] + 0.5, x
        assert x["boxScrollWidth"] >= x["canvas"]["width"] - 1, x                     # all of it inside the box
    wide = [x for x in m["maps"] if x["canvas"]["width"] > x["box"]["width"]]
    assert {x["kind"] for x in wide} >= {"encoder", "cross"} and all(x["scrollable"] == "auto" for x in wide), wide
    cross = page.locator(".at-maps canvas[data-kind='cross']")
    seen = cross.evaluate("""c => { const box = c.closest('.at-map-box');
        box.scrollTo(box.scrollWidth, box.scrollHeight);
        const b = box.getBoundingClientRect(), k = c.getBoundingClientRect();
        return {scrolled: box.scrollLeft > 0, right: k.right - b.right, bottom: k.bottom - b.bottom,
                note: c.closest('figure').querySelector('figcaption').textContent}; }""")
    assert seen["scrolled"] and seen["right"] <= 1 and seen["bottom"] <= 1, seen   # its last column and row in view
    assert "scroll" in seen["note"], seen                                          # the caption says it scrolls
    assert not errors, errors


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280px", "390px"])
def test_the_page_has_the_books_look(open_page, size):
    "No horizontal page scroll; the box, the selects and the button within the window; the page's font in every"
    " control (not the browser's monospace or Times), and the theme's borders and button colour."
    page, errors = open_page(size)
    ui_translate(page, SHORT)
    page.evaluate("() => document.activeElement.blur()")                          # the borders at rest, no focus ring
    m = page.evaluate("""() => {
      const s = (e) => getComputedStyle(e), body = s(document.body);
      const ctl = [...document.querySelectorAll('#at-translate textarea, #at-translate select, #at-translate button')];
      return {innerWidth, scrollWidth: document.documentElement.scrollWidth, bodyFont: body.fontFamily,
              rootFont: s(document.getElementById('at-translate')).fontFamily,
              controls: ctl.map(e => { const b = e.getBoundingClientRect(), c = s(e);
                return {id: e.id, left: b.left, right: b.right, height: b.height, font: c.fontFamily,
                        size: parseFloat(c.fontSize), border: c.borderTopColor, radius: c.borderTopLeftRadius,
                        appearance: c.appearance, background: c.backgroundColor, color: c.color}; })};
    }""")
    shot(page, f"look-{size[0]}.png")
    assert m["scrollWidth"] <= m["innerWidth"], f"the page is {m['scrollWidth']} px wide in a {m['innerWidth']} px window"
    ids = {c["id"] for c in m["controls"]}
    assert {"at-tr-input", "at-tr-dir", "at-tr-search", "at-tr-go"} <= ids, ids
    for c in m["controls"]:
        assert 0 <= c["left"] and c["right"] <= m["innerWidth"] + 0.5, c            # within the window
        assert c["font"] == m["bodyFont"] == m["rootFont"], (c, m["bodyFont"])     # the page's font, not the default
        assert c["size"] >= 14 and c["height"] >= 32, c                            # readable, and a finger's size
    assert not any(f in m["bodyFont"] for f in ("Times", "serif\"")) and m["bodyFont"] != "serif", m["bodyFont"]
    by_id = {c["id"]: c for c in m["controls"]}
    for i in ("at-tr-input", "at-tr-dir", "at-tr-search"):                          # cosmo's input border, radius
        assert by_id[i]["border"] == "rgb(206, 212, 218)" and by_id[i]["radius"] != "0px", by_id[i]
    assert by_id["at-tr-dir"]["appearance"] == "none", by_id["at-tr-dir"]          # the theme's select, not the OS's
    go = by_id["at-tr-go"]
    assert go["background"] == "rgb(39, 128, 227)" and go["color"] == "rgb(255, 255, 255)", go   # cosmo's primary
    assert not errors, errors
