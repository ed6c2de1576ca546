"""At the length limit a hypothesis must end (chapter 14's `force_end`, fairseq's rule): only EOS may follow there, and
it pays EOS's log-probability. Before, the search counted every live beam as finished at the limit, scored without an
EOS; on a model where one continuation has probability 0.99 a step, that cut-off beam beat a finished hypothesis at
every limit from 10 on. Both searches, `decode_corpus` with the command line's limit (the source length + 50), the
n-best lists, and the browser page's search (web/src/search.js) now return [x, EOS].

Greedy decoding keeps the same rule (chapter 06's `greedy_next`): a sequence that has not ended at the limit ends there in
EOS. So beam size 1 is greedy decoding, at the limit and below it, in all four: `greedy_decode`, `cached_greedy_decode`,
`beam_search` and `fast_beam_search`."""
import copy, json, math, shutil, subprocess
from pathlib import Path
import pytest, torch
from torch import nn
from annotated_transformer.decoding import SearchOptions, beam_search, length_normalization
from annotated_transformer.fast_decoding import fast_beam_search
from annotated_transformer.evaluation import decode_corpus
from annotated_transformer.embeddings import BOS_IDX, EOS_IDX, PAD_IDX
from annotated_transformer.attention import causal_mask
from annotated_transformer.model import create_transformer, greedy_decode
from annotated_transformer.fast_model import make_fast, cached_greedy_decode
from near_ties import LOGP_MARGIN

ROOT = Path(__file__).resolve().parents[1]
X, Z, V = 4, 5, 7


def table(first: int = X) -> torch.Tensor:
    "From <s>, `first` with p = 0.6 (the other 0.4); [x, EOS] finishes at step 2; z goes on with p = 0.99 a step."
    P = torch.zeros(V, V)
    P[BOS_IDX, first], P[BOS_IDX, Z if first == X else X], P[X, EOS_IDX] = 0.6, 0.4, 1.0
    P[Z, Z], P[Z, EOS_IDX], P[EOS_IDX, EOS_IDX] = 0.99, 0.01, 1.0
    return P


class Sticky(nn.Module):
    "Next-token log-probs that depend on the last token only; the interface of both searches and both greedy decoders."
    def __init__(self, first: int = X):
        super().__init__()
        self.register_buffer("logp", torch.log(table(first).clamp_min(1e-9)))
        self.decoder = nn.Module(); self.decoder.layers = [None]
        self.generator = nn.Identity()
    def encode(self, src, src_mask): return torch.zeros(*src.shape, 1)
    def decode(self, memory, src_mask, tgt, tgt_mask): return self.logp[tgt]
    def decode_incremental(self, memory, src_mask, tgt, cache):   # `decode_incremental` advances the cache
        return self.logp[tgt]


ONE, ONE_MASK = torch.ones(1, 1, dtype=torch.long), torch.ones(1, 1, 1, 1, dtype=torch.bool)
FINISHED = math.log(0.6) / length_normalization(2)


@pytest.mark.parametrize("search", [beam_search, fast_beam_search])
@pytest.mark.parametrize("limit", [4, 6, 10, 20, 50, None])      # None: source length + 50, as the command line
def test_a_beam_cut_off_at_the_limit_never_wins(search, limit):
    ids, score = search(Sticky(), ONE, ONE_MASK, SearchOptions(beam_size=2, length_penalty=0.6, max_new_tokens=limit))
    assert ids.tolist() == [[X, EOS_IDX]]
    assert abs(float(score) - FINISHED) < 1e-5
    lists, scores = search(Sticky(), ONE, ONE_MASK, SearchOptions(beam_size=2, max_new_tokens=limit, n_best=2))
    for hyp in lists[0].tolist():                                  # every hypothesis of the list ends in its EOS
        body = [t for t in hyp if t != PAD_IDX]
        assert body[-1] == EOS_IDX and body.count(EOS_IDX) == 1, hyp


def test_the_old_rule_would_have_returned_the_cut_off_beam():
    "The case is real: scored without an EOS, z × 50 beats [x, EOS]; with EOS's probability, it does not."
    cut = (math.log(0.4) + 49 * math.log(0.99)) / length_normalization(50)
    ended = (math.log(0.4) + 48 * math.log(0.99) + math.log(0.01)) / length_normalization(50)
    assert cut > FINISHED > ended


def test_decode_corpus_with_the_command_lines_limit():
    sources = [[BOS_IDX, 9, EOS_IDX], [BOS_IDX, EOS_IDX]]
    for search in (fast_beam_search, beam_search):
        assert decode_corpus(Sticky(), sources, SearchOptions(beam_size=2), search=search) == [[X], [X]]


def test_the_browser_pages_search_follows_the_same_rule():
    if not shutil.which("node"): pytest.skip("node is not installed (the page's build needs it too)")
    lp = torch.log(table().clamp_min(1e-9)).tolist()
    script = f"""
import {{ beamSearch, searchLimit }} from {json.dumps((ROOT / 'web/src/search.js').as_uri())};
const LP = {json.dumps(lp)};
const out = [];
for (const limit of [4, 10, 50, searchLimit(1)]) {{
  const step = async ({{ tokens }}) => ({{ logProbs: Float32Array.from(tokens.flatMap(t => LP[t])) }});
  const r = await beamSearch(step, {{ K: 2, alpha: 0.6, limit, vocab: {V}, bos: {BOS_IDX}, eos: {EOS_IDX} }});
  out.push([r.ids, r.score, r.finished.map(f => f.tokens)]);
}}
console.log(JSON.stringify(out));"""
    r = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for ids, score, finished in json.loads(r.stdout):
        assert ids == [X, EOS_IDX] and abs(score - FINISHED) < 1e-5
        assert all(f[-1] == EOS_IDX for f in finished), finished


def four_decoders(paper, fast, src, src_mask, limit: int) -> dict[str, list]:
    "The ids of greedy decoding and of beam size 1, readable and fast, at one limit."
    one = SearchOptions(beam_size=1, max_new_tokens=limit)
    return {"greedy_decode": greedy_decode(paper, src, src_mask, limit).tolist(),
            "cached_greedy_decode": cached_greedy_decode(fast, src, src_mask, limit).tolist(),
            "beam_search": beam_search(paper, src, src_mask, one)[0].tolist(),
            "fast_beam_search": fast_beam_search(fast, src, src_mask, one)[0].tolist()}


@pytest.mark.parametrize("first, ends_at", [(X, 2), (Z, None)])       # [x, EOS] at step 2; z z z ... never
@pytest.mark.parametrize("limit", [1, 2, 3, 10])
def test_beam_size_1_is_greedy_at_and_below_the_limit(first, ends_at, limit):
    "No near-tie anywhere (0.6 against 0.4, 0.99 against 0.01): all four give the same ids, EOS forced at the limit."
    model = Sticky(first)
    want = [X, EOS_IDX] if ends_at and limit >= ends_at else [first, Z, Z, Z, Z, Z, Z, Z, Z, Z][:limit - 1] + [EOS_IDX]
    for name, ids in four_decoders(model, model, ONE, ONE_MASK, limit).items():
        assert ids == [want], (name, ids)


def test_beam_size_1_is_greedy_on_a_random_transformer():
    "A seeded tiny model, sentences that end below the limit and sentences cut at it: the same ids in all four."
    torch.manual_seed(0)
    paper = create_transformer(20, 20, "tiny").eval()
    with torch.no_grad(): paper.generator.proj.bias[EOS_IDX] += 2.0         # some sentences end early
    fast = make_fast(copy.deepcopy(paper))
    src = torch.randint(4, 20, (8, 9)); src[2, 6:] = PAD_IDX; src[5, 3:] = PAD_IDX
    sm = paper.make_src_mask(src)
    free = greedy_decode(paper, src, sm, 15, end_symbol=-1)                  # never forced: argmax at each step
    with torch.no_grad():                                                    # no near-tie decides these ids
        prefix = torch.cat([torch.full_like(free[:, :1], BOS_IDX), free[:, :-1]], 1)
        top = paper.generator(paper.decode(paper.encode(src, sm), sm, prefix, causal_mask(15))).topk(2, -1).values
    assert float((top[..., 0] - top[..., 1]).min()) > LOGP_MARGIN
    for limit in (1, 4, 15):
        out = four_decoders(paper, fast, src, sm, limit)
        assert all(ids == out["greedy_decode"] for ids in out.values()), (limit, out)
    cut = [EOS_IDX not in row[:-1] for row in out["greedy_decode"]]          # at 15: some cut, some ended before
    assert any(cut) and not all(cut)
