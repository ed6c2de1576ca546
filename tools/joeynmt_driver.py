"""JoeyNMT 2.3 as a long-lived decoder: run with the JoeyNMT venv's python by `joeynmt_compare.py decode`.

    /tmp/joey/venv/bin/python tools/joeynmt_driver.py CONFIG.yaml [--no-patch]

It loads the converted model once, the way `python -m joeynmt translate` does (`prepare(..., mode="translate")`:
vocabularies, tokenizer, `build_model`, checkpoint), applies the patches that make its function ours (the output
layer's bias, LayerNorm ε; `--no-patch` leaves JoeyNMT's model as built), then answers one JSON object per line on
stdin with one JSON line on stdout. Requests ({"cmd": ...}):

* `info`: versions, threads, CPU capability, the patches applied.
* `translate`: `lines` (source lines of JoeyNMT tokens, space-separated: `<s> 129 175 …`, JoeyNMT adds `</s>`),
  `beam_size`, `beam_alpha`, `batch_size`, `max_output_length`, `min_output_length`, `threads` → `tokens` (each
  output's tokens, cut after `</s>` as JoeyNMT's `predict` gives them) and `seconds`: the wall time of JoeyNMT's own
  `predict` call alone (its batching, its search; its model load and our pipe excluded).
* `score`: `lines` as above and `targets` (target lines of tokens without `<s>`/`</s>`) → teacher-forced
  log-probabilities, the full distribution of every target position (`</s>` included), base64 float32 per
  sentence, shape (len + 1, vocab), in JoeyNMT's id order.

Everything JoeyNMT logs goes to stderr; stdout carries only the answers.
"""
import base64, json, os, platform, sys, time

_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
sys.stdout = sys.stderr                              # JoeyNMT's prints and logs stay off the answer pipe

import numpy as np
import torch
import yaml
from joeynmt.config import parse_global_args
from joeynmt.prediction import prepare, predict


def patch(model, bias: torch.Tensor, eps: float) -> list[str]:
    "Our output layer's bias (JoeyNMT's has none) and our LayerNorm ε (JoeyNMT's 1e-6): the same function."
    out = model.decoder.output_layer
    biased = torch.nn.Linear(out.in_features, out.out_features, bias=True)
    biased.weight = out.weight                       # still tied to the embeddings
    biased.bias = torch.nn.Parameter(bias.to(out.weight.dtype), requires_grad=False)
    model.decoder.output_layer = biased
    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm): m.eps, n = eps, n + 1
    return [f"decoder.output_layer: bias of {bias.numel()} added", f"LayerNorm eps -> {eps:g} ({n} norms)"]


def main():
    cfg_path, patched = sys.argv[1], "--no-patch" not in sys.argv
    cfg = yaml.safe_load(open(cfg_path, encoding="utf-8"))
    args = parse_global_args(cfg, rank=0, mode="translate")
    model, _, _, stream = prepare(args, rank=0, mode="translate")
    model.eval()
    ck = torch.load(args.test.load_model, map_location="cpu", weights_only=True)
    patches = patch(model, ck["output_bias"], float(ck["layer_norm_eps"])) if patched else []
    vocab = model.trg_vocab

    def translate(q):
        torch.set_num_threads(int(q.get("threads", 1)))
        test = args.test._replace(beam_size=q["beam_size"], beam_alpha=q["beam_alpha"],
                                  batch_size=q["batch_size"], batch_type="sentence",
                                  max_output_length=q["max_output_length"],
                                  min_output_length=q.get("min_output_length", 0),
                                  return_prob="none", n_best=1)
        stream.reset_cache()
        for line in q["lines"]: stream.set_item(line)
        t0 = time.perf_counter()
        _, _, _, tokens, _, _ = predict(model=model, data=stream, compute_loss=False, device=args.device,
                                        rank=0, n_gpu=0, normalization="none", num_workers=0, args=test,
                                        autocast=args.autocast)
        seconds = time.perf_counter() - t0
        stream.reset_cache()
        return {"tokens": tokens, "seconds": seconds}

    def score(q):
        torch.set_num_threads(int(q.get("threads", 1)))
        out = []
        with torch.no_grad():
            for line, tgt in zip(q["lines"], q["targets"]):
                src = [vocab.lookup(t) for t in line.split(" ")] + [vocab.eos_index]
                trg = [vocab.bos_index] + [vocab.lookup(t) for t in tgt.split(" ")] + [vocab.eos_index]
                src_t = torch.tensor([src]); trg_in = torch.tensor([trg[:-1]])
                src_mask = (src_t != vocab.pad_index).unsqueeze(1)
                enc, enc_h, _, _ = model(return_type="encode", src=src_t, src_length=torch.tensor([len(src)]),
                                         src_mask=src_mask)
                logits, _, _, _ = model(return_type="decode", encoder_output=enc, encoder_hidden=enc_h,
                                        src_mask=src_mask, trg_input=trg_in, unroll_steps=trg_in.size(1),
                                        trg_mask=(trg_in != vocab.pad_index).unsqueeze(1))
                lp = torch.log_softmax(logits, dim=-1)[0].float().numpy()          # (len + 1, vocab)
                out.append({"shape": list(lp.shape), "b64": base64.b64encode(lp.tobytes()).decode()})
        return {"logprobs": out}

    def info(q):
        import joeynmt
        return {"joeynmt": joeynmt.__version__, "torch": torch.__version__, "python": platform.python_version(),
                "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": torch.get_num_threads(),
                "patches": patches, "vocab_size": len(vocab),
                "layer_norm_eps": sorted({m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)}),
                "output_bias": model.decoder.output_layer.bias is not None}

    handlers = {"translate": translate, "score": score, "info": info}
    _out.write(json.dumps({"ready": True, "patches": patches}) + "\n")
    for raw in sys.stdin:
        if not raw.strip(): continue
        q = json.loads(raw)
        if q.get("cmd") == "quit": break
        try: _out.write(json.dumps(handlers[q["cmd"]](q)) + "\n")
        except Exception as e:                          # the caller sees it and stops
            _out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")


if __name__ == "__main__":
    main()
