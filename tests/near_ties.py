"""The near-tie rule the tests share (tests/test_browser_translate.py states it first): two decodings of one sentence
by different computations may part only where the reference model sees a near-tie, for greedy search at the step
where they part (its two best next tokens within LOGP_MARGIN), for beam search between the two final hypotheses
(their normalised scores within LOGP_MARGIN)."""
import torch

from annotated_transformer.attention import causal_mask
from annotated_transformer.decoding import length_normalization
from annotated_transformer.embeddings import BOS_IDX, EOS_IDX

LOGP_MARGIN = 1e-3   # nats


@torch.no_grad()
def log_probs(model, src_ids: list[int], tgt_in: list[int]) -> torch.Tensor:
    "(len(tgt_in), vocab) float64 log-probs of the next token after each prefix of `tgt_in`."
    src, tgt = torch.tensor([src_ids]), torch.tensor([tgt_in])
    sm = model.make_src_mask(src)
    return model.generator(model.decode(model.encode(src, sm), sm, tgt, causal_mask(len(tgt_in))))[0].double()


def normalized_score(model, src_ids: list[int], hyp: list[int], alpha: float = 0.6) -> float:
    "log P(hyp + </s>) / lp(|hyp| + 1): what beam search ranks finished hypotheses by (chapter 14)."
    hyp = hyp + [EOS_IDX]
    lp = log_probs(model, src_ids, [BOS_IDX] + hyp[:-1])
    return float(lp[torch.arange(len(hyp)), torch.tensor(hyp)].sum()) / length_normalization(len(hyp), alpha)


def near_tie(model, src_ids: list[int], a: list[int], b: list[int], beam: int) -> bool:
    "Whether `model` sees a near-tie where outputs `a` and `b` part (greedy) or between them (beam)."
    if beam > 1: return abs(normalized_score(model, src_ids, a) - normalized_score(model, src_ids, b)) <= LOGP_MARGIN
    t = next(k for k, (x, y) in enumerate(zip(a + [EOS_IDX], b + [EOS_IDX])) if x != y)
    top = log_probs(model, src_ids, [BOS_IDX] + a[:t])[-1].topk(2).values
    return float(top[0] - top[1]) <= LOGP_MARGIN
