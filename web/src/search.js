// Beam search (greedy = beam 1) exactly as annotated_transformer/fast_decoding.py `fast_beam_search`
// (decoding.py: `length_normalization`, `search_limits`, `force_end`, `top_candidates`, `search_done`).
//
// Running log-probs: the Python package keeps them in a float32 tensor (`scores`, and `cand =
// scores + logp` is float32), so they are rounded to float32 after each addition here too
// (Math.fround); the normalised finished scores (logP / lp) and the stop rule are float64, as in
// Python (`top.tolist()` / lp, `best_live.double() / lp_max`).
//
// The model is abstracted as `step(tokens, parents)`: run one decoder step for the live beams,
// whose KV cache rows have been reordered by `parents` (null at the first step), on the newest
// token of each beam; it returns {logProbs: Float32Array (n_live·vocab), attn: per row, anything}.

export function lengthNormalization(length, alpha = 0.6) {
  // GNMT lp(Y) = ((5 + |Y|) / 6)^α
  return Math.pow((5 + length) / 6, alpha);
}

export function searchLimit(srcLen, { extraLen = 50, maxLen = 1024, maxNewTokens = null } = {}) {
  // srcLen counts BOS and EOS (the real tokens of the source mask)
  const limit = maxNewTokens == null ? srcLen + extraLen : maxNewTokens;
  return maxLen == null ? limit : Math.min(limit, maxLen);
}

// The n best (value, flat index) of `cand` (length n_live·V), best first; ties: lower index first.
function topN(cand, n) {
  const vals = [], idx = [];
  for (let i = 0; i < cand.length; i++) {
    const v = cand[i];
    if (vals.length === n && !(v > vals[n - 1])) continue;
    let j = vals.length === n ? n - 1 : vals.length;
    if (vals.length < n) { vals.push(v); idx.push(i); }
    while (j > 0 && v > vals[j - 1]) { vals[j] = vals[j - 1]; idx[j] = idx[j - 1]; j--; }
    vals[j] = v; idx[j] = i;
  }
  return { vals, idx };
}

export function searchDone(bestLive, nthBest, nFinished, step, limit, K, alpha) {
  if (K === 1) return nFinished >= K;          // greedy: ends at its EOS
  const lpMax = Math.max(lengthNormalization(limit, alpha), lengthNormalization(step + 1, alpha));
  return nthBest > -Infinity && bestLive / lpMax <= nthBest;
}

/**
 * @param {Function} step async ({tokens, parents, nLive}) -> {logProbs, attn}
 *        tokens: Int array of each live beam's newest token; parents: for each new live row, the
 *        row of the previous step it continues (null at step 1). attn: per row an opaque record.
 * @returns {{ids, score, attn, finished}} ids: tokens incl. the final EOS
 */
export async function beamSearch(step, { K = 4, alpha = 0.6, limit, vocab, bos = 1, eos = 2 }) {
  let seqs = [[bos]];          // live beams, BOS first
  let hist = [[]];             // per live beam: the attention records of its steps
  let scores = [0];            // float32-rounded total log-probs; one live beam at first
  let parents = null;
  let finished = [];           // K best {score, tokens, attn}, best first, stable
  for (let t = 1; ; t++) {
    const nLive = seqs.length;
    const out = await step({ tokens: seqs.map(s => s[s.length - 1]), parents, nLive, step: t });
    const V = vocab;
    const lp = out.logProbs;
    const atLimit = t >= limit;   // force_end: at the limit only EOS may follow, and pays its log-prob
    const cand = new Float64Array(nLive * V);
    for (let r = 0; r < nLive; r++) {
      const s = scores[r];
      for (let v = 0; v < V; v++)
        cand[r * V + v] = atLimit && v !== eos ? -Infinity : Math.fround(s + lp[r * V + v]);
    }
    const { vals: top, idx } = topN(cand, Math.min(2 * K, nLive * V));
    const parent = idx.map(i => Math.floor(i / V)), tok = idx.map(i => i % V);
    const isEos = tok.map(x => x === eos);
    const norm = lengthNormalization(t, alpha);
    const rowHist = r => hist[r].concat([out.attn ? out.attn[r] : null]);
    // _collect_finished: the top-K candidates that end (in EOS)
    const fresh = [];
    for (let j = 0; j < Math.min(K, top.length); j++) {
      if (isEos[j] && top[j] > -Infinity)
        fresh.push({ score: top[j] / norm, tokens: seqs[parent[j]].slice(1).concat([tok[j]]),
                     attn: rowHist(parent[j]), step: t });
    }
    finished = finished.concat(fresh);
    // stable sort, descending score: of two equal scores, the earlier stays ahead
    finished = finished.map((f, i) => [f, i]).sort((a, b) => (b[0].score - a[0].score) || (a[1] - b[1]))
                       .map(x => x[0]).slice(0, K);
    // the K best that do not end go on
    const alive = [];
    for (let j = 0; j < top.length && alive.length < K; j++) if (!isEos[j]) alive.push(j);
    const bestLive = alive.length ? top[alive[0]] : -Infinity;
    const nth = finished.length >= 1 ? finished[0].score : -Infinity;   // n_best or 1 = 1
    const done = atLimit || searchDone(bestLive, nth, finished.length, t, limit, K, alpha);
    if (done || alive.length === 0) break;
    parents = alive.map(j => parent[j]);
    seqs = alive.map(j => seqs[parent[j]].concat([tok[j]]));
    hist = alive.map(j => rowHist(parent[j]));
    scores = alive.map(j => top[j]);
  }
  const best = finished[0];
  return { ids: best.tokens, score: best.score, attn: best.attn, finished };
}
