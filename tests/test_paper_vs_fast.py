"""The paper's model and the fast model agree (chapters 22 and 23: readable, then fast).

Both shipped models, as the paper's classes with chapter 14's readable search and as the fast twins with the fast search,
decode validation sentences to the same ids, except where a near-tie decides: for greedy, the step where the two part has
its two best next tokens within LOGP_MARGIN; for beam search, both final hypotheses score within LOGP_MARGIN under the
paper's model (the rule of tests/test_browser_translate.py). Teacher-forced outputs agree to a stated tolerance, in eval
and in training mode. The two are different computations (other matrix shapes), so nothing here is bit-for-bit."""
import copy, gzip, os
from pathlib import Path
import pytest, torch
from annotated_transformer.pretrained import load_model
from annotated_transformer.evaluation import decode_corpus, encode_sources
from annotated_transformer.decoding import SearchOptions, beam_search
from annotated_transformer.fast_decoding import fast_beam_search
from annotated_transformer.fast_model import make_fast, is_fast
from near_ties import near_tie

N_SENTENCES = 120      # validation sentences per direction (the closing note's run used 300)


def _val(lang: str, n: int) -> list[str]:
    root = Path(os.environ.get("ANNOTATED_TRANSFORMER_DATA", "")) / "multi30k" / f"val.{lang}.gz"
    if not root.is_file(): pytest.skip(f"no Multi30k validation file at {root}")
    with gzip.open(root, "rt", encoding="utf-8") as f: return [next(f).rstrip("\n") for _ in range(n)]


@pytest.fixture(scope="module", params=["de-en", "en-de"])
def pair(request):
    torch.set_num_threads(1)
    paper, codec, _ = load_model(request.param)                      # as saved: the paper's classes
    fast = make_fast(copy.deepcopy(paper))                            # as the command line runs it
    ids, _ = encode_sources(codec, _val(request.param[:2], N_SENTENCES), fast.config.max_len)
    return request.param, fast, paper, ids


@pytest.mark.parametrize("beam", [1, 4])
def test_paper_and_fast_decode_the_same_ids(pair, beam):
    direction, fast, paper, ids = pair
    assert is_fast(fast) and not is_fast(paper)
    readable = decode_corpus(paper, ids, SearchOptions(beam_size=beam), search=beam_search)   # chapter 14 on the paper's classes
    quick = decode_corpus(fast, ids, SearchOptions(beam_size=beam), fast_beam_search)   # chapter 23 on the fast twins
    differ = [i for i, (a, b) in enumerate(zip(readable, quick)) if a != b]
    unexplained = [i for i in differ if not near_tie(paper, ids[i], readable[i], quick[i], beam)]
    print(f"[paper vs fast] {direction} beam {beam}: {len(ids) - len(differ)}/{len(ids)} identical, "
          f"{len(differ) - len(unexplained)} near-ties")
    assert not unexplained, f"{direction} beam {beam}: sentences {unexplained} differ where no near-tie decides"
    assert len(differ) <= len(ids) // 50


def test_n_best_lists_agree(pair):
    direction, fast, paper, ids = pair
    few = ids[:30]
    a = decode_corpus(paper, few, SearchOptions(beam_size=4, n_best=4), search=beam_search)
    b = decode_corpus(fast, few, SearchOptions(beam_size=4, n_best=4), fast_beam_search)
    same = sum([h for _, h in x] == [h for _, h in y] for x, y in zip(a, b))
    assert same >= len(few) - 1, f"{direction}: n-best lists identical on {same}/{len(few)}"
    for x, y in zip(a, b):
        if [h for _, h in x] == [h for _, h in y]:
            torch.testing.assert_close(torch.tensor([s for s, _ in y]), torch.tensor([s for s, _ in x]), atol=1e-4, rtol=0)


@pytest.mark.parametrize("training", [False, True])
def test_teacher_forced_outputs_agree(pair, training):
    "Decoder states at real positions within 1e-4 (float32, other matrix shapes); dropout draws the same masks."
    _, fast, paper, ids = pair
    batch = ids[:16]
    L = max(map(len, batch))
    src = torch.tensor([s + [0] * (L - len(s)) for s in batch])
    tgt = src[:, :12].clamp(max=fast.config.tgt_vocab_size - 1)
    outs = []
    for m in (paper, fast):
        m.train(training)
        torch.manual_seed(0)
        with torch.no_grad(): outs.append(m(src, tgt, m.make_src_mask(src), m.make_tgt_mask(tgt)))
        m.eval()
    real = tgt != fast.config.pad_idx
    torch.testing.assert_close(outs[1][real], outs[0][real], atol=1e-4, rtol=1e-4)
