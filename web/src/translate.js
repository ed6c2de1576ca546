// The in-browser translator: builds its UI inside <div id="at-translate" data-models="…">.
// Nothing is fetched until the first Translate; models live at `${data-models}/de-en/` and
// `${data-models}/en-de/` (relative to the page), the gzipped WASM runtime next to this script.
// Its look is translate.css (bundled as text by build.mjs, added to the page once).
import { Translator, stats, fmtBytes } from './model.js';
import { isBlank, cutMessage, heatmapLayout, LABEL_PX } from './input.js';
import STYLE from './translate.css';

const DIRECTIONS = { 'de-en': 'German → English', 'en-de': 'English → German' };
const KINDS = [['encoder', 'Encoder self-attention', 'srcTokens', 'srcTokens'],
               ['decoder', 'Decoder self-attention', 'tgtTokens', 'tgtTokens'],
               ['cross', 'Encoder–decoder (cross) attention', 'tgtTokens', 'srcTokens']];
const WASM_URL = new URL('ort-wasm-simd-threaded.wasm.gz', import.meta.url);

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

function heatmap(canvas, matrix, rows, cols, family = 'sans-serif') {
  const dpr = window.devicePixelRatio || 1, font = `11px ${family}`;   // the page's font
  const { cell, labels } = heatmapLayout(rows.length, cols.length, dpr);   // within what a browser draws
  const ctx = canvas.getContext('2d');
  ctx.font = font;
  const pad = (ts) => labels ? Math.min(LABEL_PX, Math.ceil(Math.max(20, ...ts.map(t => ctx.measureText(t).width))) + 8) : 4;
  const padL = pad(rows), padT = pad(cols);
  const w = padL + cols.length * cell + 4, h = padT + rows.length * cell + 4;
  canvas.width = w * dpr; canvas.height = h * dpr;
  canvas.style.width = `${w}px`; canvas.style.height = `${h}px`;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, w, h);
  ctx.font = font;
  for (let i = 0; i < rows.length; i++) for (let j = 0; j < cols.length; j++) {
    const v = Math.max(0, Math.min(1, matrix[i][j]));
    const c = Math.round(255 * (1 - v));
    ctx.fillStyle = `rgb(${c},${c},${Math.round(255 - 155 * v)})`;
    ctx.fillRect(padL + j * cell, padT + i * cell, Math.max(1, cell - 1), Math.max(1, cell - 1));
  }
  if (!labels) return;                   // cells too small for a readable token label
  ctx.fillStyle = '#000'; ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  rows.forEach((t, i) => ctx.fillText(t, padL - 4, padT + i * cell + cell / 2));
  ctx.save();
  cols.forEach((t, j) => {
    ctx.setTransform(dpr, 0, 0, dpr, dpr * (padL + j * cell + cell / 2), dpr * (padT - 4));
    ctx.rotate(-Math.PI / 2); ctx.textAlign = 'left'; ctx.fillText(t, 0, 0);
  });
  ctx.restore();
}

function addStyle() {
  if (document.getElementById('at-translate-style')) return;
  document.head.append(el('style', { id: 'at-translate-style', text: STYLE }));
}

// a label above its control, in a block of its own
const field = (label, control) =>
  el('div', { class: 'at-field' }, el('label', { for: control.id, text: label }), control);

function build(root) {
  const base = root.dataset.models || 'browser/models';
  const uid = 'at-tr';
  addStyle();
  root.dataset.state = 'ready';
  root.classList.add('at-translate');
  const status = el('p', { class: 'at-status', role: 'status', 'aria-live': 'polite' });
  if (typeof WebAssembly === 'undefined') {
    root.dataset.state = 'error';
    status.textContent = 'This browser has no WebAssembly, which the in-browser translator needs: ' +
      'try a current Firefox, Chrome, Edge or Safari (with WebAssembly / JIT enabled).';
    root.replaceChildren(status);
    return null;
  }
  const input = el('textarea', { id: `${uid}-input`, rows: '3', 'aria-describedby': `${uid}-hint`,
                                 placeholder: 'Ein Mann fährt Fahrrad.' });
  const dir = el('select', { id: `${uid}-dir` });
  for (const [v, t] of Object.entries(DIRECTIONS)) dir.append(el('option', { value: v, text: t }));
  const search = el('select', { id: `${uid}-search` },
    el('option', { value: '1', text: 'greedy' }), el('option', { value: '4', text: 'beam search (4 beams)' }));
  const button = el('button', { type: 'button', id: `${uid}-go`, text: 'Translate' });
  const output = el('output', { id: `${uid}-output`, for: `${uid}-input`, class: 'at-output', 'aria-live': 'polite' });
  const layer = el('select', { id: `${uid}-layer` });
  const head = el('select', { id: `${uid}-head` });
  const maps = el('div', { class: 'at-maps' });
  const result = el('div', { class: 'at-result', hidden: '' },      // shown once there is a translation
    el('span', { class: 'at-result-label', text: 'Translation' }), output);
  const viz = el('fieldset', { class: 'at-attention', hidden: '' },
    el('legend', { text: 'Attention for the sentence just translated' }),
    el('div', { class: 'at-row' }, field('Layer', layer), field('Head', head)), maps);
  root.replaceChildren(
    el('div', { class: 'at-field' },
       el('label', { for: `${uid}-input`, text: 'Sentence to translate' }),
       el('p', { id: `${uid}-hint`, class: 'at-hint', text: 'Enter translates; Shift+Enter starts a new line.' }),
       input),
    el('div', { class: 'at-row' }, field('Direction', dir), field('Search', search), button),
    status,
    result,
    viz);

  const translators = new Map();   // direction -> Promise<Translator>
  let last = null;
  const setStatus = (s) => { status.textContent = s; };
  const progress = (dirn) => (name, loaded, total) => {
    if (name === 'sessions') return setStatus(`Loading ${dirn}: starting the ONNX sessions…`);
    setStatus(`Loading ${dirn}: ${name} ${fmtBytes(loaded)}${total ? ' of ' + fmtBytes(total) : ''} ` +
              `(downloaded so far: ${fmtBytes(stats.bytes + (loaded < total ? loaded : 0))})`);
  };
  const getTranslator = (dirn) => {
    if (!translators.has(dirn)) {
      const p = Translator.load(new URL(`${base.replace(/\/$/, '')}/${dirn}/`, document.baseURI).href,
                                WASM_URL, progress(dirn));
      translators.set(dirn, p);
      p.catch(() => translators.delete(dirn));
    }
    return translators.get(dirn);
  };

  const drawMaps = () => {
    if (!last) return;
    const a = last.attention, l = Number(layer.value), hv = head.value;
    maps.replaceChildren();
    for (const [kind, title, rk, ck] of KINDS) {
      const per = a[kind][l];
      const m = hv === 'mean'
        ? per[0].map((row, i) => row.map((_, j) => per.reduce((s, hm) => s + hm[i][j], 0) / per.length))
        : per[Number(hv)];
      const label = `${title}, layer ${l}, ${hv === 'mean' ? 'mean of heads' : 'head ' + hv}`;
      const canvas = el('canvas', { role: 'img', 'aria-label': label });
      canvas.dataset.kind = kind;
      heatmap(canvas, m, a[rk], a[ck], getComputedStyle(root).fontFamily);
      // a map larger than the column scrolls inside its box (focusable: arrow keys scroll it)
      const box = el('div', { class: 'at-map-box', tabindex: '0', role: 'group', 'aria-label': label }, canvas);
      const caption = el('figcaption', { text: `${title} (${a[rk].length} × ${a[ck].length})` });
      maps.append(el('figure', { class: 'at-map' }, caption, box));
      if (box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1)
        caption.append(el('span', { class: 'at-scroll-note', text: ': larger than the page, scroll inside it' }));
    }
  };
  layer.addEventListener('change', drawMaps);
  head.addEventListener('change', drawMaps);

  // one translation at a time (an ONNX session runs one call at a time): calls queue up
  let queue = Promise.resolve();
  function translate(text, opts = {}) {
    const run = queue.then(() => translateNow(text, opts));
    queue = run.catch(() => {});
    return run;
  }
  async function translateNow(text, { direction = dir.value, beam = Number(search.value) } = {}) {
    if (isBlank(text)) {                 // as the package: a blank line is not translated, its translation is ""
      last = null;
      output.textContent = '';
      result.hidden = viz.hidden = true;
      setStatus('Nothing to translate: the box is empty.');
      return { text: '', ids: [], blank: true };
    }
    root.dataset.state = 'loading';
    button.disabled = true;
    try {
      const fresh = !translators.has(direction);
      const tr = await getTranslator(direction);
      setStatus(`${fresh ? 'Loaded (' + fmtBytes(stats.bytes) + ' downloaded). ' : ''}Translating…`);
      const res = await tr.translate(text, { beam });
      res.direction = direction; res.beam = beam;
      last = res;
      output.textContent = res.text;
      result.hidden = false;
      const cfg = tr.cfg;
      layer.replaceChildren(...Array.from({ length: cfg.n_layers }, (_, i) => el('option', { value: String(i), text: String(i) })));
      layer.value = String(cfg.n_layers - 1);
      head.replaceChildren(el('option', { value: 'mean', text: 'mean of heads' }),
        ...Array.from({ length: cfg.n_heads }, (_, i) => el('option', { value: String(i), text: String(i) })));
      viz.hidden = false;
      drawMaps();
      setStatus(`${res.cut ? 'Note: ' + cutMessage(cfg.max_len) + '. ' : ''}` +
                `${DIRECTIONS[direction]}, ${beam === 1 ? 'greedy' : 'beam ' + beam}: ` +
                `${res.steps} decoder steps in ${res.ms.toFixed(0)} ms (downloaded in all: ${fmtBytes(stats.bytes)})`);
      root.dataset.state = 'ready';
      return res;
    } catch (e) {
      root.dataset.state = 'error';
      setStatus(`Error: ${e && e.message ? e.message : e}`);
      throw e;
    } finally {
      button.disabled = false;
    }
  }
  const go = () => { if (!button.disabled) translate(input.value).catch(e => console.error(e)); };
  button.addEventListener('click', go);
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); go(); }
  });
  // the source ids the page would translate, and whether they were cut (for the browser test)
  const encode = async (text, direction = dir.value) => (await getTranslator(direction)).encodeSource(text);
  return { translate, encode, get last() { return last; }, stats };
}

function init() {
  const root = document.getElementById('at-translate');
  if (!root) return;
  const api = build(root);
  if (api) window.atTranslate = api;
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
else init();
