// Loading an exported model folder (model.json, tokenizer.json, encoder.onnx, decoder.onnx,
// weights.bin) and translating with it: onnxruntime-web on its WASM backend, one thread.
import { beamSearch, searchLimit } from './search.js';
import { sourceIds } from './input.js';

let ortPromise = null;   // onnxruntime-web, imported (and its WASM binary set) at first use

export const stats = { bytes: 0, files: [] };   // everything this page fetched for translation

export function fmtBytes(n) {
  if (n == null) return '? bytes';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

// Fetch a URL into a Uint8Array, reporting (name, loaded, total) as it arrives.
export async function fetchBytes(url, onProgress) {
  const resp = await fetch(url);
  if (!resp.ok) throw new Error(`${url}: HTTP ${resp.status} ${resp.statusText}`);
  const len = Number(resp.headers.get('Content-Length')) || null;
  const name = String(url).split('/').pop();
  let loaded = 0;
  const chunks = [];
  if (resp.body && resp.body.getReader) {
    const reader = resp.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      loaded += value.length;
      onProgress && onProgress(name, loaded, len);
    }
  } else {
    const b = new Uint8Array(await resp.arrayBuffer());
    chunks.push(b); loaded = b.length;
  }
  const out = new Uint8Array(loaded);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.length; }
  stats.bytes += loaded;
  stats.files.push({ url: String(url), bytes: loaded });
  onProgress && onProgress(name, loaded, loaded);
  return out;
}

async function gunzip(bytes) {
  if (!(bytes[0] === 0x1f && bytes[1] === 0x8b)) return bytes;  // a server already decoded it
  if (typeof DecompressionStream === 'undefined')
    throw new Error('this browser lacks DecompressionStream (needed to unpack the WASM runtime)');
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

export function loadOrt(wasmUrl, onProgress) {
  if (!ortPromise) {
    ortPromise = (async () => {
      const gz = await fetchBytes(wasmUrl, onProgress);
      const wasm = await gunzip(gz);
      const ort = await import('onnxruntime-web/wasm');
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.proxy = false;
      ort.env.wasm.wasmBinary = wasm;
      return ort;
    })();
    ortPromise.catch(() => { ortPromise = null; });
  }
  return ortPromise;
}

export class Translator {
  constructor(ort, cfg, tokenizer, encoder, decoder) {
    Object.assign(this, { ort, cfg, tokenizer, encoder, decoder });
  }

  static async load(baseUrl, wasmUrl, onProgress) {
    const base = baseUrl.endsWith('/') ? baseUrl : baseUrl + '/';
    const ort = await loadOrt(wasmUrl, onProgress);
    const cfg = JSON.parse(new TextDecoder().decode(await fetchBytes(new URL('model.json', base), onProgress)));
    const f = cfg.files || {};
    const [tokBytes, encBytes, decBytes, weights] = await Promise.all([
      fetchBytes(new URL(f.tokenizer || 'tokenizer.json', base), onProgress),
      fetchBytes(new URL(f.encoder || 'encoder.onnx', base), onProgress),
      fetchBytes(new URL(f.decoder || 'decoder.onnx', base), onProgress),
      fetchBytes(new URL(f.weights || 'weights.bin', base), onProgress)]);
    const { Tokenizer } = await import('@huggingface/tokenizers');
    const tokenizer = new Tokenizer(JSON.parse(new TextDecoder().decode(tokBytes)), {});
    const opts = { executionProviders: ['wasm'], graphOptimizationLevel: 'all',
                   externalData: [{ path: f.weights || 'weights.bin', data: weights }] };
    onProgress && onProgress('sessions', null, null);
    const encoder = await ort.InferenceSession.create(encBytes, opts);
    const decoder = await ort.InferenceSession.create(decBytes, opts);
    return new Translator(ort, cfg, tokenizer, encoder, decoder);
  }

  encodeSource(text) {   // -> { ids: <s> … </s>, cut: whether it was longer than max_len (input.js)
    const c = this.cfg;
    return sourceIds(this.tokenizer.encode(text, { add_special_tokens: false }).ids,
                     { bos: c.bos_idx, eos: c.eos_idx, maxLen: c.max_len });
  }

  token(id) { return this.tokenizer.id_to_token(id) ?? String(id); }

  decodeIds(ids) {
    const c = this.cfg, out = [];
    for (const i of ids) { if (i === c.eos_idx) break; if (i !== c.pad_idx && i !== c.bos_idx) out.push(i); }
    return { ids: out, text: this.tokenizer.decode(out, { skip_special_tokens: false,
                                                          clean_up_tokenization_spaces: false }).trim() };
  }

  async translate(text, { beam = 1 } = {}) {
    const { ort, cfg } = this;
    const L = cfg.n_layers, H = cfg.n_heads, D = cfg.d_k, V = cfg.vocab_size;
    const { ids: srcIds, cut } = this.encodeSource(text);
    const S = srcIds.length;
    const srcTensor = n => new ort.Tensor('int64', BigInt64Array.from(
      Array.from({ length: n }, () => srcIds).flat(), BigInt), [n, S]);
    const t0 = performance.now();
    const enc = await this.encoder.run({ src: srcTensor(1) });
    const crossK1 = enc.cross_k, crossV1 = enc.cross_v;
    const encAttn = enc.enc_attn.data;    // (L, 1, H, S, S)
    const cross = new Map([[1, [crossK1, crossV1, srcTensor(1)]]]);
    const repeat = (t, n) => {   // (L, 1, H, S, D) -> (L, n, H, S, D)
      const blk = H * S * D, out = new Float32Array(L * n * blk);
      for (let l = 0; l < L; l++) for (let r = 0; r < n; r++)
        out.set(t.data.subarray(l * blk, (l + 1) * blk), (l * n + r) * blk);
      return new ort.Tensor('float32', out, [L, n, H, S, D]);
    };
    const crossFor = n => {
      if (!cross.has(n)) cross.set(n, [repeat(crossK1, n), repeat(crossV1, n), srcTensor(n)]);
      return cross.get(n);
    };
    let pastK = new ort.Tensor('float32', new Float32Array(0), [L, 1, H, 0, D]);
    let pastV = new ort.Tensor('float32', new Float32Array(0), [L, 1, H, 0, D]);
    const reorder = (t, parents) => {   // (L, n, H, T, D) rows -> (L, parents.length, H, T, D)
      const [, n, , T] = t.dims, blk = H * T * D, m = parents.length, out = new Float32Array(L * m * blk);
      for (let l = 0; l < L; l++) for (let r = 0; r < m; r++) {
        const src = (l * n + parents[r]) * blk;
        out.set(t.data.subarray(src, src + blk), (l * m + r) * blk);
      }
      return new ort.Tensor('float32', out, [L, m, H, T, D]);
    };
    let steps = 0;
    const step = async ({ tokens, parents, nLive }) => {
      steps++;
      if (parents) { pastK = reorder(pastK, parents); pastV = reorder(pastV, parents); }
      const [ck, cv, src] = crossFor(nLive);
      const out = await this.decoder.run({
        tgt: new ort.Tensor('int64', BigInt64Array.from(tokens, BigInt), [nLive, 1]),
        src, past_k: pastK, past_v: pastV, cross_k: ck, cross_v: cv });
      pastK = out.present_k; pastV = out.present_v;
      const T = out.self_attn.dims[3];
      const sa = out.self_attn.data, ca = out.cross_attn.data;   // (L, n, H, T), (L, n, H, S)
      const attn = [];
      for (let r = 0; r < nLive; r++) {
        const self = new Float32Array(L * H * T), crs = new Float32Array(L * H * S);
        for (let l = 0; l < L; l++) {
          self.set(sa.subarray((l * nLive + r) * H * T, (l * nLive + r + 1) * H * T), l * H * T);
          crs.set(ca.subarray((l * nLive + r) * H * S, (l * nLive + r + 1) * H * S), l * H * S);
        }
        attn.push({ self, cross: crs, T });
      }
      return { logProbs: out.log_probs.data, attn };
    };
    const limit = searchLimit(S, { extraLen: cfg.extra_len ?? 50, maxLen: cfg.max_len ?? 1024 });
    const res = await beamSearch(step, { K: beam, alpha: cfg.length_penalty ?? 0.6, limit, vocab: V,
                                         bos: cfg.bos_idx, eos: cfg.eos_idx });
    const ms = performance.now() - t0;
    const { ids, text: out } = this.decodeIds(res.ids);
    // attention of the hypothesis: nested arrays [layer][head][query][key]
    const n = res.attn.length;   // decoder steps = output tokens (incl. EOS)
    const enc4 = [], self4 = [], cross4 = [];
    for (let l = 0; l < L; l++) {
      enc4.push([]); self4.push([]); cross4.push([]);
      for (let h = 0; h < H; h++) {
        const e = [], s = [], c = [];
        for (let q = 0; q < S; q++) e.push(Array.from(encAttn.subarray(((l * H + h) * S + q) * S, ((l * H + h) * S + q + 1) * S)));
        for (let q = 0; q < n; q++) {
          const a = res.attn[q], row = new Array(n).fill(0);
          for (let k = 0; k < a.T; k++) row[k] = a.self[(l * H + h) * a.T + k];
          s.push(row);
          c.push(Array.from(a.cross.subarray((l * H + h) * S, (l * H + h + 1) * S)));
        }
        enc4[l].push(e); self4[l].push(s); cross4[l].push(c);
      }
    }
    const tgtIn = [cfg.bos_idx, ...res.ids.slice(0, -1)];   // the decoder's input at each step
    return {
      text: out, ids, outIds: res.ids, srcIds, cut, score: res.score, steps, ms,
      attention: { encoder: enc4, decoder: self4, cross: cross4,
                   srcTokens: srcIds.map(i => this.token(i)), tgtTokens: tgtIn.map(i => this.token(i)),
                   outTokens: res.ids.map(i => this.token(i)) },
    };
  }
}
