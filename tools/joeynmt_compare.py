"""A fair, repeatable comparison with JoeyNMT 2.3 ("minimalist NMT for educational purposes"): the same Multi30k
de→en data, the same `small` model and schedule, the same CPU threads and the same wall-clock budget; then the
target tokens per second each trains at and the val BLEU (beam 4, α 0.6, sacreBLEU on the raw references) each
reaches in that time.

Run it with our venv's python (it reads our recipe from `annotated_transformer.multi30k.RECIPES`), one heavy step
at a time, with ANNOTATED_TRANSFORMER_DATA set to the data root (it reads $ANNOTATED_TRANSFORMER_DATA/multi30k/*.gz):

    python tools/joeynmt_compare.py setup                 # JoeyNMT in its own venv (default /tmp/joey/venv)
    python tools/joeynmt_compare.py prepare               # data, SentencePiece BPE, config.yaml (/tmp/joey/joey)
    python tools/joeynmt_compare.py run-joey --minutes 30 --threads 1   # -> /tmp/joey/runs/joey-30min-1thr/result.json
    python tools/joeynmt_compare.py run-ours --minutes 30 --threads 1   # -> /tmp/joey/runs/ours-30min-1thr/result.json
    python tools/joeynmt_compare.py compare /tmp/joey/runs/joey-30min-1thr/result.json \\
                                            /tmp/joey/runs/ours-30min-1thr/result.json

`--work DIR` (default /tmp/joey) moves everything; `--venv DIR` the JoeyNMT venv. Nothing is kept outside those
folders, and each step reads only the files the earlier steps wrote there.

What each side runs, as a new user of it would:
* JoeyNMT: `python -m joeynmt train config.yaml --skip-test` with OMP_NUM_THREADS=MKL_NUM_THREADS=T (JoeyNMT never
  calls torch.set_num_threads, so torch takes these), SIGINT after M minutes (JoeyNMT catches KeyboardInterrupt and
  saves the current weights as latest.ckpt), then `python -m joeynmt test` with that checkpoint, beam 4, α 0.6.
* ours: `annotated-transformer train --recipe small-long --device cpu --checkpoint-dir DIR` with the same environment
  (the CLI has no thread flag; torch takes OMP_NUM_THREADS), SIGTERM after M minutes (it saves a checkpoint), then
  `annotated-transformer evaluate --checkpoint DIR --split val --beam-size 4 --length-penalty 0.6`.
Both runs' M minutes start when the process starts, so each pays its own start-up (ours learns its BPE then;
JoeyNMT's SentencePiece model is learnt by `prepare`, outside the clock; `startup_s` in the JSON says how long each
took before its first update). tokens/s = real target tokens trained / seconds from the first update to the stop
(validation included, as it happens); `engine_tokens_per_s` is what the engine itself logs.

Deviations that JoeyNMT's options cannot remove are listed in `DEVIATIONS` and written into every result.

Decoding on the same weights (our shipped model, decoded by JoeyNMT's own beam search and by ours):

    python tools/joeynmt_compare.py convert --model de-en        # -> /tmp/joey/decode/de-en/{model.ckpt,config.yaml,vocab.txt}
    python tools/joeynmt_compare.py decode --threads 1 2         # -> nbs/results/joeynmt_decode.json

`convert` maps our post-norm model into a JoeyNMT 2.3 checkpoint (`joey_state_dict`, the weight mapping of chapter
34's CTranslate2 export) with a config that JoeyNMT loads as it is (`layer_norm: post`, scaled embeddings, tied
embeddings and softmax, level `word` over our ids written out: `DECODE_MAPPING`), then checks it: the
teacher-forced log-probs of JoeyNMT's model on validation sentences against ours (tolerance 1e-4), with and without
the patches below, and greedy ids on 100 validation sentences (-> verify.json, copied into the decode result).
`decode` starts `tools/joeynmt_driver.py` in JoeyNMT's venv as a long-lived process (the model loaded once, one
JSON request per line; it reports the wall time of JoeyNMT's `predict` call), then times it and our
`decode_corpus(pack_linears(make_fast(model)), …, fast_beam_search)` (what the CLI's `translate` runs) in turn, one warm-up and `--rounds`
timed rounds, on the same thread count, over the same 64-sentence batches (JoeyNMT gets the sentences in our
length-sorted order); both outputs are detokenized by our codec and scored by sacreBLEU on the raw references.

What JoeyNMT cannot express, and what is patched after it loads its model (`DECODE_DEVIATIONS`):
* its tied output layer has no bias: patched (a Linear with bias, weight still tied, ours in it); speed: one bias
  add per step, well under 1 %;
* its LayerNorm ε is 1e-6, ours 1e-5: patched (ε set on all 15 norms); no speed effect;
* one max_output_length per call, a hypothesis ends there without </s>: set to the largest of our per-sentence
  caps, min(source length + 50, max_len) (ours forces </s> at each sentence's cap); no output comes near it;
* its beam search lets finished hypotheses keep their beam slots and ends a sentence when all slots are finished
  (ours: K live beams, the exact stopping bound); it never generates <s> or <pad>;
* min_output_length 0 (its default 1 forbids </s> first; ours allows it).
"""
import argparse, gzip, json, os, re, shlex, signal, subprocess, sys, time
from datetime import datetime
from pathlib import Path

WORK = Path("/tmp/joey")
JOEY_PINS = ["joeynmt==2.3.0",
             "importlib_metadata",      # imported by joeynmt 2.3, not declared
             "sentencepiece==0.1.99"]   # joeynmt calls SentencePieceProcessor.SetVocabulary, gone in 0.2
TORCH_PIN = "torch==2.13.0"             # first, so pip takes the local CPU wheel, not a CUDA build

DEVIATIONS = [
    "BPE: ours is Hugging Face tokenizers BPE, JoeyNMT's is SentencePiece BPE (same joint size, both learnt on "
    "the training sides; pieces differ)",
    "dropout: JoeyNMT's one `dropout` is also applied to attention weights and inside the FFN; ours has "
    "attn_dropout = activation_dropout = 0",
    "batches: ours groups by length and counts source + target tokens with padding; JoeyNMT (batch_type token) "
    "shuffles without bucketing and counts max(src, trg) + 1 per sentence times sentences; see "
    "tgt_tokens_per_update",
    "parameters: ours has a bias on the output projection (tgt vocab size more, 8,000 at small), JoeyNMT's "
    "tied softmax has none",
    "Adam ε: JoeyNMT uses torch's 1e-8 (no option), ours 1e-9",
    "LayerNorm ε: JoeyNMT 1e-6, ours torch's 1e-5; JoeyNMT biases start at zero (bias_initializer), ours at "
    "torch's default",
    "schedule: JoeyNMT's update k uses the noam rate of step k-1 (update 1 uses learning_rate, set to the rate "
    "of step 1)",
    "validation: JoeyNMT greedy-decodes the val set every validation_freq updates (default 1000: not within a "
    "30-minute run on one thread); ours "
    "computes val loss at epoch ends",
]


# ---------------------------------------------------------------------------------------------------- helpers
def _venv_python(venv: Path) -> Path: return Path(venv) / "bin" / "python"

def _run(cmd, **kw):
    print("+", shlex.join(map(str, cmd)), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)

def _py_json(python, code: str, *args) -> dict:
    "Run `code` (which prints one JSON object last) in another interpreter."
    out = subprocess.run([str(python), "-c", code, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])

_ENV_INFO = """
import json, platform, torch
info = {"torch": torch.__version__, "python": platform.python_version(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": torch.get_num_threads()}
for m in ("joeynmt", "sentencepiece", "sacrebleu", "annotated_transformer", "tokenizers"):
    try: info[m] = __import__(m).__version__
    except Exception: pass
print(json.dumps(info))
"""

def vendor_and_cpu() -> str:
    "The CPU's vendor and name, as the package reads them, e.g. 'AMD / AMD EPYC 7B13'."
    from annotated_transformer.runtime import hardware_summary
    from annotated_transformer.benchmarking import cpu_vendor
    cpu = hardware_summary(as_dict=True)["cpu"]
    return f"{cpu_vendor(cpu)} / {cpu}"

def env_info(python, threads: int) -> dict:
    "Versions, CPU and torch's view of it, as the engine's own interpreter sees them with `threads`."
    env = {**os.environ, **thread_env(threads)}
    out = subprocess.run([str(python), "-c", _ENV_INFO], check=True, capture_output=True, text=True, env=env)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    return {**info, "cpu_vendor": vendor_and_cpu(), "nproc": os.cpu_count()}

def thread_env(threads: int) -> dict:
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}

def data_root() -> Path:
    root = os.environ.get("ANNOTATED_TRANSFORMER_DATA")
    if not root: sys.exit("set ANNOTATED_TRANSFORMER_DATA to the data root (it reads multi30k/*.gz there)")
    d = Path(root) / "multi30k"
    if not (d / "train.de.gz").is_file(): sys.exit(f"{d}/train.de.gz not found")
    return d

def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f: return [l.rstrip("\n") for l in f]

def bleu(hyps: list[str], refs: list[str]) -> dict:
    "sacreBLEU (default 13a tokenization) of detokenized hypotheses against the raw references."
    import sacrebleu
    if len(hyps) != len(refs): raise SystemExit(f"{len(hyps)} hypotheses for {len(refs)} references")
    m = sacrebleu.metrics.BLEU()
    s = m.corpus_score(hyps, [refs])
    return {"bleu": round(s.score, 2), "signature": str(m.get_signature())}

def our_recipe(name: str) -> dict:
    "Our recipe and its model preset, from the package itself (so the config follows the recipe)."
    from annotated_transformer.multi30k import RECIPES
    from annotated_transformer.model import get_config
    r = RECIPES[name]
    c = get_config(r.model, dropout=r.dropout, **r.model_overrides)
    return {"recipe": r.to_dict(), "model": c.to_dict()}

def child_setup(cpu: int | None):
    "For the trainer's process: SIGINT at its default (a shell's background job inherits it ignored, and then "
    "JoeyNMT never sees the Ctrl-C that makes it save), and pinned to one CPU if asked."
    def setup():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if cpu is not None: os.sched_setaffinity(0, {cpu})
    return setup

def stop_after(proc: subprocess.Popen, seconds: float, sig: int, grace: float = 300) -> dict:
    "Wait `seconds` (or the process's end), send `sig`, wait `grace` for it to save and exit, then SIGKILL."
    t0 = time.time()
    try: proc.wait(timeout=seconds); return {"signal": None, "rc": proc.returncode, "ended_by_itself": True}
    except subprocess.TimeoutExpired: pass
    sent = time.time()
    proc.send_signal(sig)
    try: proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill(); proc.wait()
        return {"signal": signal.Signals(sig).name, "rc": proc.returncode, "killed": True,
                "stop_s": round(time.time() - sent, 1)}
    return {"signal": signal.Signals(sig).name, "rc": proc.returncode, "sent_at_s": round(sent - t0, 1),
            "exit_after_signal_s": round(time.time() - sent, 1)}


# ------------------------------------------------------------------------------------------------------ setup
def cmd_setup(a):
    venv = Path(a.venv)
    if not _venv_python(venv).exists(): _run([sys.executable, "-m", "venv", venv])
    pip = [_venv_python(venv), "-m", "pip", "install", "-q"]
    _run(pip + [TORCH_PIN])
    _run(pip + JOEY_PINS + [TORCH_PIN])       # torch pinned again: nothing may swap it
    info = env_info(_venv_python(venv), 1)
    _run([_venv_python(venv), "-c", "import joeynmt.training, joeynmt.prediction, sentencepiece; "
                                    "sentencepiece.SentencePieceProcessor().SetVocabulary"])
    print(json.dumps(info, indent=1))


# ---------------------------------------------------------------------------------------------------- prepare
_SPM_TRAIN = """
import json, sys, sentencepiece as spm
inp, prefix, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
spm.SentencePieceTrainer.train(input=inp, model_prefix=prefix, vocab_size=size, model_type="bpe",
    character_coverage=1.0, unk_id=0, pad_id=1, bos_id=2, eos_id=3,
    unk_piece="<unk>", pad_piece="<pad>", bos_piece="<s>", eos_piece="</s>", minloglevel=2)
sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
open(prefix + ".vocab.txt", "w", encoding="utf-8").write("\\n".join(pieces) + "\\n")
print(json.dumps({"pieces": len(pieces)}))
"""

_JOEY_BATCHES = """
import json, random, sys, sentencepiece as spm
model, src, trg, sizes = sys.argv[1], sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4].split(",")]
sp = spm.SentencePieceProcessor(model_file=model)
ls = [len(x) for x in sp.encode(open(src, encoding="utf-8").read().splitlines())]
lt = [len(x) for x in sp.encode(open(trg, encoding="utf-8").read().splitlines())]
out = {}
for b in sizes:   # JoeyNMT's TokenBatchSampler over one shuffled epoch; ntokens = target tokens + EOS
    idx = list(range(len(ls))); random.Random(0).shuffle(idx)
    batches, cur, mx = [], [], 0
    for i in idx:
        cur.append(i); mx = max(mx, max(ls[i] + 1, lt[i] + 1))
        if mx * len(cur) >= b: batches.append(cur); cur, mx = [], 0
    if cur: batches.append(cur)
    out[b] = {"updates_per_epoch": len(batches),
              "tgt_tokens_per_update": round(sum(lt[i] + 1 for bt in batches for i in bt) / len(batches), 1)}
print(json.dumps(out))
"""

def joey_config(ours: dict, data: Path, spm_prefix: Path, batch_size: int, validation_freq: int,
                model_dir: Path, seed: int) -> dict:
    "A JoeyNMT 2.3 config that is our recipe as far as JoeyNMT's options go."
    r, m = ours["recipe"], ours["model"]
    d, warm, factor = m["d_model"], r["warmup_steps"], r["lr_scale"]
    side = lambda lang: {"lang": lang, "level": "bpe", "lowercase": False, "normalize": False,
                         "max_length": m["max_len"],   # ours cuts at max_len; Multi30k never reaches it
                         "voc_file": f"{spm_prefix}.vocab.txt", "tokenizer_type": "sentencepiece",
                         "tokenizer_cfg": {"model_file": f"{spm_prefix}.model"}}
    stack = lambda: {"type": "transformer", "num_layers": m["n_layers"], "num_heads": m["n_heads"],
                     "embeddings": {"embedding_dim": d, "scale": True, "dropout": m["dropout"]},
                     "hidden_size": d, "ff_size": m["d_ff"], "dropout": m["dropout"],
                     "layer_norm": "pre" if m["norm_first"] else "post", "activation": "relu"}
    return {
        "name": "multi30k-de-en-like-ours-" + r["model"],
        "joeynmt_version": "2.3.0",
        "model_dir": str(model_dir),
        "use_cuda": False, "fp16": False, "random_seed": seed,
        "data": {"train": str(data / "train"), "dev": str(data / "val"), "dataset_type": "plain",
                 "src": side("de"), "trg": side("en"),
                 "special_symbols": {"unk_token": "<unk>", "unk_id": 0, "pad_token": "<pad>", "pad_id": 1,
                                     "bos_token": "<s>", "bos_id": 2, "eos_token": "</s>", "eos_id": 3}},
        "testing": {"n_best": 1, "beam_size": r["beam_size"], "beam_alpha": r["length_penalty"],
                    "batch_size": 64, "batch_type": "sentence", "eval_metrics": ["bleu"],
                    "sacrebleu_cfg": {"tokenize": "13a"}},
        "training": {
            "optimizer": "adam", "adam_betas": [0.9, 0.98], "weight_decay": 0.0,
            "scheduling": "noam", "learning_rate_factor": factor, "learning_rate_warmup": warm,
            # update 1 runs before the scheduler's first step: give it the rate of step 1
            "learning_rate": factor * d ** -0.5 * warm ** -1.5,
            "learning_rate_min": 1.0e-9,     # the default 1e-4 would stop the run during warmup
            "loss": "crossentropy", "label_smoothing": r["label_smoothing"], "normalization": "tokens",
            **({"clip_grad_norm": r["clip_grad"]} if r["clip_grad"] else {}),
            "batch_size": batch_size, "batch_type": "token", "batch_multiplier": r["accum_steps"],
            "epochs": 1000, "shuffle": True,
            "validation_freq": validation_freq, "logging_freq": 10,
            "early_stopping_metric": "bleu", "keep_best_ckpts": 2, "overwrite": True,
            "print_valid_sents": [0, 1],
        },
        "model": {"initializer": "xavier_uniform", "init_gain": 1.0, "bias_initializer": "zeros",
                  "embed_initializer": "xavier_uniform", "embed_init_gain": 1.0,
                  "tied_embeddings": bool(m["share_embeddings"]) or r["vocab"] == "bpe",
                  "tied_softmax": bool(m["share_embeddings"]) or r["vocab"] == "bpe",
                  "encoder": stack(), "decoder": stack()},
    }

def cmd_prepare(a):
    import yaml
    work, src_dir = Path(a.work), data_root()
    jd, data = work / "joey", work / "joey" / "data"
    data.mkdir(parents=True, exist_ok=True)
    ours = our_recipe(a.recipe)
    r = ours["recipe"]
    for split in ("train", "val"):
        for lang in ("de", "en"):
            lines = read_gz(src_dir / f"{split}.{lang}.gz")
            (data / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{split}: {len(lines)} pairs -> {data}/{split}.{{de,en}}")
    joint = data / "train.joint.txt"         # the training sides only, as ours learns its joint BPE
    joint.write_text((data / "train.de").read_text(encoding="utf-8") + (data / "train.en").read_text(encoding="utf-8"),
                     encoding="utf-8")
    spm_prefix = jd / f"spm{r['bpe_vocab_size']}"
    py = _venv_python(a.venv)
    print(_py_json(py, _SPM_TRAIN, joint, spm_prefix, r["bpe_vocab_size"]))
    batch_size = a.batch_size or r["batch_tokens"]
    cfg = joey_config(ours, data, spm_prefix, batch_size, a.validation_freq, jd / "model", a.seed)
    (jd / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    (jd / "ours.json").write_text(json.dumps(ours, indent=1), encoding="utf-8")
    sizes = sorted({batch_size, r["batch_tokens"] // 2, r["batch_tokens"] * 3 // 4, r["batch_tokens"]})
    sim = _py_json(py, _JOEY_BATCHES, f"{spm_prefix}.model", data / "train.de", data / "train.en",
                   ",".join(map(str, sizes)))
    print(f"our recipe {a.recipe}: {json.dumps(ours)}")
    print(f"JoeyNMT batches per batch_size (simulated, one epoch): {json.dumps(sim)}")
    print(f"--- {jd / 'config.yaml'}")
    print((jd / "config.yaml").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------------- run-joey
_JOEY_CKPT = """
import json, sys, torch
ck = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
s = ck["stats_state"]
print(json.dumps({"steps": s["steps"], "total_tokens": s["total_tokens"]}))
"""

_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - ")

def _joey_log(log: Path) -> dict:
    "From JoeyNMT's train.log: params, the first update's and the stop's times, its own tokens/s."
    out, tok_s, t_first, t_stop = {}, [], None, None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _TS.match(line)
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None
        if (p := re.search(r"Total params: (\d+)", line)): out["params"] = int(p.group(1))
        if (p := re.search(r"Step:\s+(\d+),.*Tokens per Sec:\s+(\d+)", line)):
            tok_s.append(float(p.group(2)))
            if t_first is None: out["first_log_step"], t_first = int(p.group(1)), t
        if "EPOCH 1" in line and "start" not in out: out["start"] = t
        if "Interrupt at epoch" in line or "Training ended" in line: t_stop = t
        if t is not None: out["last_line"] = t
    out["engine_tokens_per_s"] = round(sum(tok_s) / len(tok_s)) if tok_s else None
    out["stop"] = t_stop or out.get("last_line")
    return out

def cmd_run_joey(a):
    import yaml
    work, M, T = Path(a.work), a.minutes, a.threads
    run_dir = Path(a.run_dir or work / "runs" / f"joey-{M:g}min-{T}thr")
    run_dir.mkdir(parents=True, exist_ok=True)
    py = _venv_python(a.venv)
    cfg = yaml.safe_load((work / "joey" / "config.yaml").read_text(encoding="utf-8"))
    cfg["model_dir"] = str(run_dir / "model")
    cfg_path = run_dir / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    print(f"--- {cfg_path}\n{cfg_path.read_text()}")
    env = {**os.environ, **thread_env(T), "PYTHONUNBUFFERED": "1"}
    cmd = [str(py), "-m", "joeynmt", "train", str(cfg_path), "--skip-test"]
    print("+", " ".join(f"{k}={v}" for k, v in thread_env(T).items()), shlex.join(cmd), flush=True)
    t0 = time.time()
    with open(run_dir / "train.out", "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=child_setup(a.cpu))
        stop = stop_after(proc, M * 60, signal.SIGINT)   # JoeyNMT saves latest.ckpt on KeyboardInterrupt
    wall = time.time() - t0
    model_dir = run_dir / "model"
    ckpt = model_dir / "latest.ckpt"
    if not ckpt.exists(): sys.exit(f"JoeyNMT left no checkpoint in {model_dir}; see {run_dir / 'train.out'}")
    ck = _py_json(py, _JOEY_CKPT, ckpt)
    log = _joey_log(model_dir / "train.log")
    train_s = (log["stop"] - log["start"]) if log.get("start") and log.get("stop") else None
    # translate val with the last checkpoint, beam 4, α 0.6
    tcfg = dict(cfg, testing={**cfg["testing"], "load_model": str(ckpt.resolve())})
    tcfg_path = run_dir / "test.yaml"
    tcfg_path.write_text(yaml.safe_dump(tcfg, sort_keys=False), encoding="utf-8")
    test_cmd = [str(py), "-m", "joeynmt", "test", str(tcfg_path), "-o", str(run_dir / "hyps")]
    print("+", shlex.join(test_cmd), flush=True)
    t1 = time.time()
    with open(run_dir / "test.out", "w") as out:
        subprocess.run(test_cmd, stdout=out, stderr=subprocess.STDOUT, env=env, check=True)
    decode_s = time.time() - t1
    hyps = (run_dir / "hyps.dev").read_text(encoding="utf-8").splitlines()
    refs = read_gz(data_root() / "val.en.gz")
    res = {
        "engine": "joeynmt", "version": None, "minutes": M, "threads": T,
        "command": " ".join(f"{k}={v}" for k, v in thread_env(T).items()) + " " + shlex.join(cmd),
        "test_command": shlex.join(test_cmd), "stop": stop, "wall_s": round(wall, 1),
        "config": cfg, "params": log.get("params"),   # its log's "Total params" (shared weights once)
        "updates": ck["steps"], "tgt_tokens": ck["total_tokens"],
        "tgt_tokens_per_update": round(ck["total_tokens"] / max(ck["steps"], 1), 1),
        "train_s": round(train_s, 1) if train_s else None,
        "startup_s": round(log["start"] - t0, 1) if log.get("start") else None,
        "tokens_per_s": round(ck["total_tokens"] / train_s) if train_s else None,
        "engine_tokens_per_s": log.get("engine_tokens_per_s"),
        "val": {**bleu(hyps, refs), "beam_size": cfg["testing"]["beam_size"],
                "length_penalty": cfg["testing"]["beam_alpha"], "sentences": len(refs),
                "checkpoint": str(ckpt.resolve()), "decode_s": round(decode_s, 1)},
        "env": env_info(py, T), "deviations": DEVIATIONS,
    }
    res["version"] = res["env"].get("joeynmt")
    _write(res, Path(a.out or run_dir / "result.json"))


# --------------------------------------------------------------------------------------------------- run-ours
def _our_log(text: str) -> dict:
    "From our train stderr: the vocabulary's time, and the tqdm bar's last tok_s and elapsed time."
    out = {}
    if (m := re.search(r"vocabulary \(\w+\):.*\(([\d.]+) s\)", text)): out["vocab_s"] = float(m.group(1))
    if (m := re.search(r"training \w+ \(([\d.]+)M parameters\)", text)): out["params_m"] = float(m.group(1))
    toks = re.findall(r"tok_s=([\d,]+)", text)
    if toks: out["engine_tokens_per_s"] = int(toks[-1].replace(",", ""))
    return out

def cmd_run_ours(a):
    from annotated_transformer.checkpoints import latest_checkpoint, load_checkpoint
    from annotated_transformer.model import count_parameters
    work, M, T = Path(a.work), a.minutes, a.threads
    data_root()
    suffix = "" if a.precision == "fp32" else f"-{a.precision}"
    run_dir = Path(a.run_dir or work / "runs" / f"ours-{M:g}min-{T}thr{suffix}")
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt_dir = run_dir / "ckpt"
    exe = Path(sys.executable).parent / "annotated-transformer"
    env = {**os.environ, **thread_env(T), "PYTHONUNBUFFERED": "1"}
    cmd = [str(exe), "train", "--recipe", a.recipe, "--device", "cpu", "--checkpoint-dir", str(ckpt_dir),
           "--seed", str(a.seed)]
    if a.precision != "fp32": cmd += ["--precision", a.precision]
    print("+", " ".join(f"{k}={v}" for k, v in thread_env(T).items()), shlex.join(cmd), flush=True)
    t0 = time.time()
    with open(run_dir / "train.out", "w") as out, open(run_dir / "train.log", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, preexec_fn=child_setup(a.cpu))
        stop = stop_after(proc, M * 60, signal.SIGTERM)   # the CLI saves a checkpoint and exits
    wall = time.time() - t0
    ck_path = latest_checkpoint(ckpt_dir)
    if ck_path is None: sys.exit(f"no checkpoint in {ckpt_dir}; see {run_dir / 'train.log'}")
    ck = load_checkpoint(ck_path)
    st = ck["train_state"]
    log = _our_log((run_dir / "train.log").read_text(encoding="utf-8", errors="replace"))
    from annotated_transformer.checkpoints import model_from_checkpoint
    params = count_parameters(model_from_checkpoint(ck, map_location="cpu"))
    hyp_file = run_dir / "hyps.val.txt"
    ev_cmd = [str(exe), "evaluate", "--checkpoint", str(ck_path), "--split", "val", "--beam-size", "4",
              "--length-penalty", "0.6", "--device", "cpu", "--output", str(hyp_file), "--json"]
    print("+", shlex.join(ev_cmd), flush=True)
    t1 = time.time()
    ev = subprocess.run(ev_cmd, capture_output=True, text=True, env=env, check=True)
    decode_s = time.time() - t1
    (run_dir / "evaluate.out").write_text(ev.stdout + ev.stderr, encoding="utf-8")
    ev_json = json.loads(ev.stdout.strip().splitlines()[-1])
    hyps = hyp_file.read_text(encoding="utf-8").splitlines()
    refs = read_gz(data_root() / "val.en.gz")
    tok_s = log.get("engine_tokens_per_s")
    train_s = st["tokens"] / tok_s if tok_s else None   # the bar's rate: tokens since fit began / its seconds
    res = {
        "engine": "annotated_transformer", "version": None, "minutes": M, "threads": T, "precision": a.precision,
        "command": " ".join(f"{k}={v}" for k, v in thread_env(T).items()) + " " + shlex.join(cmd),
        "test_command": shlex.join(ev_cmd), "stop": stop, "wall_s": round(wall, 1),
        "config": json.loads((Path(a.work) / "joey" / "ours.json").read_text())
                  if (Path(a.work) / "joey" / "ours.json").exists() else our_recipe(a.recipe),
        "params": params, "updates": st["step"], "tgt_tokens": st["tokens"],
        "tgt_tokens_per_update": round(st["tokens"] / max(st["step"], 1), 1),
        "train_s": round(train_s, 1) if train_s else None,
        "startup_s": round(stop.get("sent_at_s", wall) - train_s, 1) if train_s else None,
        "vocab_s": log.get("vocab_s"),
        "tokens_per_s": tok_s, "engine_tokens_per_s": tok_s,
        "val": {**bleu(hyps, refs), "beam_size": 4, "length_penalty": 0.6, "sentences": len(refs),
                "checkpoint": str(ck_path), "decode_s": round(decode_s, 1),
                "cli_bleu": ev_json.get("bleu", ev_json)},
        "env": env_info(sys.executable, T), "deviations": DEVIATIONS,
    }
    res["version"] = res["env"].get("annotated_transformer")
    _write(res, Path(a.out or run_dir / "result.json"))


def _write(res: dict, path: Path):
    path.write_text(json.dumps(res, indent=1, ensure_ascii=False), encoding="utf-8")
    short = {k: res[k] for k in ("engine", "version", "params", "threads", "minutes", "updates",
                                 "tgt_tokens_per_update", "tokens_per_s", "engine_tokens_per_s", "startup_s")}
    print(json.dumps({**short, "val_bleu": res["val"]["bleu"], "cpu": res["env"]["cpu_vendor"],
                      "cpu_capability": res["env"]["cpu_capability"]}, indent=1))
    print(f"-> {path}")


# ---------------------------------------------------------------------------------------------------- compare
def cmd_compare(a):
    rs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in a.results]
    base = rs[0]["tokens_per_s"] or 1
    print("| engine | version | params | threads | tgt tok/update | tokens/s | ratio | "
          "val BLEU after M min | M |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rs:
        print(f"| {r['engine']} | {r['version']} | {r['params'] / 1e6:.2f}M | {r['threads']} | "
              f"{r['tgt_tokens_per_update']:.0f} | {r['tokens_per_s']:,} | {r['tokens_per_s'] / base:.2f} | "
              f"{r['val']['bleu']:.2f} | {r['minutes']:g} |")
    cpus = {(r["env"]["cpu_vendor"], r["env"]["cpu_capability"]) for r in rs}
    print(f"\nCPU: {'; '.join(f'{v}, torch capability {c}' for v, c in sorted(cpus))}. ratio: tokens/s over "
          f"the first row's. tokens/s: real target tokens / seconds from the first update to the stop.")


# ----------------------------------------------------------------------------------------- convert, decode
DECODE_DEVIATIONS = [
    "output layer: JoeyNMT's tied softmax has no bias, ours has one (8,000 values); patched after JoeyNMT loads "
    "its model: its output layer becomes a Linear with bias (weight still tied to the embeddings) holding ours. "
    "Expected speed effect: one bias add per decoder step on (rows × 8,000) logits, well under 1 %",
    "LayerNorm ε: JoeyNMT builds every LayerNorm with 1e-6, ours uses torch's 1e-5; patched after loading (ε set "
    "on its 15 norms). No speed effect",
    "maximum output length: JoeyNMT takes one max_output_length for a whole call and ends a hypothesis there "
    "without </s>; ours caps each sentence at min(source length + 50, max_len) tokens and forces </s> at the "
    "cap. JoeyNMT gets the largest of our caps over the sentences of the call (see max_output_length and "
    "longest_output: no output comes near it)",
    "search: JoeyNMT's beam search (OpenNMT-py style) lets finished hypotheses keep their slots in the beam and "
    "ends a sentence when every slot is finished; ours keeps K live beams and stops by the exact bound (no live "
    "beam can still beat the best finished one). The length penalty is the same GNMT ((5 + |Y|) / 6)^α with "
    "</s> counted. Outputs differ where the two rules find different hypotheses",
    "search: JoeyNMT never generates <s> or <pad> (their log-probs set to -inf each step); ours does not forbid "
    "them (the trained model never ranks them in the beam)",
    "min_output_length: set to 0 (JoeyNMT's default 1 forbids </s> as the first token; ours allows it)",
]

DECODE_MAPPING = [
    "vocabulary: JoeyNMT puts <unk>, <pad>, <s>, </s> at ids 0-3, ours <pad>, <s>, </s>, <unk>; the first four "
    "rows of the shared embedding (= output weight) and of the output bias are permuted to JoeyNMT's order and "
    "its ids are mapped back one to one; every other id is the same. JoeyNMT's tokens are our ids written "
    "out (`129`), its level `word` tokenizer splits them on spaces",
    "source: ours is <s> … </s>; JoeyNMT appends </s> itself and is given `<s> 129 175 …`, so both encoders "
    "read the same ids",
    "weights: W^Q, W^K, W^V are the three row blocks of our fused in_proj; each post-norm sublayer's LayerNorm "
    "goes to JoeyNMT's (encoder: layer_norm, feed_forward.layer_norm; decoder: x_layer_norm, dec_layer_norm, "
    "feed_forward.layer_norm), as chapter 34 maps them for CTranslate2; the sinusoidal table is ours in its "
    "first max_len rows",
]

def joey_order(vocab_size: int) -> list[int]:
    "Our id of each JoeyNMT id: JoeyNMT's vocabulary starts <unk>, <pad>, <s>, </s>; the other ids stay."
    from annotated_transformer.embeddings import UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX
    head = [UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX]
    return head + [i for i in range(vocab_size) if i not in head]

JOEY_SPECIALS = ["<unk>", "<pad>", "<s>", "</s>"]     # JoeyNMT's special tokens, at its ids 0-3

def joey_tokens(vocab_size: int) -> list[str]:
    "JoeyNMT's vocabulary file, token i at line i: its specials, then our ids written out."
    order = joey_order(vocab_size)
    return JOEY_SPECIALS + [str(order[j]) for j in range(len(JOEY_SPECIALS), vocab_size)]

def sinusoid_table(n: int, d: int):
    "JoeyNMT's own PositionalEncoding table (1, n, d), as its transformer_layers.py computes it."
    import math, torch
    pe = torch.zeros(n, d)
    pos = torch.arange(0, n).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float) * -(math.log(10000.0) / d))
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos.float() * div), torch.cos(pos.float() * div)
    return pe[None]

def joey_state_dict(model, joey_pe_len: int = 5000) -> tuple[dict, "torch.Tensor"]:
    "Our post-norm `Transformer` as a JoeyNMT 2.3 model_state, and the output bias JoeyNMT has no place for."
    import torch
    c = model.config
    if c.norm_first: raise ValueError("the converter maps post-norm models (norm_first=False) only")
    if not c.share_embeddings: raise ValueError("JoeyNMT's tied_embeddings/tied_softmax need shared embeddings")
    if c.positional != "sinusoidal": raise ValueError(f"positional={c.positional!r}: JoeyNMT has sinusoidal only")
    if c.d_k not in (None, c.d_model // c.n_heads): raise ValueError(f"d_k={c.d_k}: JoeyNMT's is d_model/h")
    perm = torch.tensor(joey_order(c.tgt_vocab_size))
    t = lambda x: x.detach().float().clone().contiguous()
    emb = t(model.src_embed.embed.lut.weight[perm])
    sd = {"src_embed.lut.weight": emb, "trg_embed.lut.weight": emb, "decoder.output_layer.weight": emb}
    pe = sinusoid_table(max(joey_pe_len, c.max_len), c.d_model)
    for side, e in (("encoder", model.src_embed), ("decoder", model.tgt_embed)):
        table = pe.clone()
        table[0, :e.pos.pe.shape[0]] = t(e.pos.pe)                   # ours where ours is defined
        sd[f"{side}.pe.pe"] = table
    def lin(p, w, b): sd[p + ".weight"], sd[p + ".bias"] = t(w), t(b)
    def norm(p, ln): lin(p, ln.weight, ln.bias)
    def att(p, mha):
        W, b, d = mha.in_proj.weight, mha.in_proj.bias, mha.inner    # (3·h·d_k, d_model): [W^Q; W^K; W^V]
        for k, name in enumerate("qkv"): lin(f"{p}.{name}_layer", W[k * d:(k + 1) * d], b[k * d:(k + 1) * d])
        lin(f"{p}.output_layer", mha.out_proj.weight, mha.out_proj.bias)
    def ffn(p, ff, ln):
        lin(f"{p}.pwff_layer.0", ff.w_1.weight, ff.w_1.bias)
        lin(f"{p}.pwff_layer.3", ff.w_2.weight, ff.w_2.bias)
        norm(f"{p}.layer_norm", ln)
    for i, l in enumerate(model.encoder.layers):
        p = f"encoder.layers.{i}"
        att(f"{p}.src_src_att", l.self_attn); norm(f"{p}.layer_norm", l.sublayer[0].norm)
        ffn(f"{p}.feed_forward", l.feed_forward, l.sublayer[1].norm)
    for i, l in enumerate(model.decoder.layers):
        p = f"decoder.layers.{i}"
        att(f"{p}.trg_trg_att", l.self_attn); norm(f"{p}.x_layer_norm", l.sublayer[0].norm)
        att(f"{p}.src_trg_att", l.src_attn); norm(f"{p}.dec_layer_norm", l.sublayer[1].norm)
        ffn(f"{p}.feed_forward", l.feed_forward, l.sublayer[2].norm)
    return sd, t(model.generator.proj.bias[perm])

def joey_decode_config(c: dict, folder: Path, ckpt: Path, src_lang: str, tgt_lang: str) -> dict:
    "A JoeyNMT 2.3 config for our model `c` (`TransformerConfig.to_dict()`): load, tokenize, decode."
    side = lambda lang: {"lang": lang, "level": "word", "lowercase": False, "normalize": False,
                         "max_length": -1, "voc_file": str(folder / "vocab.txt")}
    stack = lambda: {"type": "transformer", "num_layers": c["n_layers"], "num_heads": c["n_heads"],
                     "embeddings": {"embedding_dim": c["d_model"], "scale": True, "dropout": 0.0},
                     "hidden_size": c["d_model"], "ff_size": c["d_ff"], "dropout": 0.0,
                     "layer_norm": "post", "activation": "relu"}
    return {
        "name": f"annotated-transformer-{src_lang}-{tgt_lang}", "joeynmt_version": "2.3.0",
        "model_dir": str(folder), "use_cuda": False, "fp16": False, "random_seed": 0,
        "data": {"test": str(folder / "unused"),         # JoeyNMT wants a path; the stream never reads it
                 "src": side(src_lang), "trg": side(tgt_lang),
                 "special_symbols": {"unk_token": "<unk>", "unk_id": 0, "pad_token": "<pad>", "pad_id": 1,
                                     "bos_token": "<s>", "bos_id": 2, "eos_token": "</s>", "eos_id": 3}},
        "testing": {"load_model": str(ckpt), "n_best": 1, "beam_size": 4, "beam_alpha": 0.6,
                    "batch_size": 64, "batch_type": "sentence", "max_output_length": c["max_len"],
                    "min_output_length": 0, "eval_metrics": ["bleu"]},
        "training": {"loss": "crossentropy", "label_smoothing": 0.0, "batch_size": 64,   # read, unused
                     "batch_type": "sentence"},
        "model": {"initializer": "xavier_uniform", "bias_initializer": "zeros",
                  "embed_initializer": "xavier_uniform", "tied_embeddings": True, "tied_softmax": True,
                  "encoder": stack(), "decoder": stack()},
    }

def _decode_dir(a) -> Path: return Path(a.work) / "decode" / a.model

def cmd_convert(a):
    "Write the JoeyNMT checkpoint, config.yaml and vocab.txt of our shipped model, then verify them."
    import torch, yaml
    from annotated_transformer.pretrained import load_model
    from annotated_transformer.fast_model import make_fast
    model, codec, meta = load_model(a.model)
    model = make_fast(model)                                          # as the command line decodes
    folder = _decode_dir(a)
    folder.mkdir(parents=True, exist_ok=True)
    sd, bias = joey_state_dict(model)
    eps = model.encoder.layers[0].sublayer[0].norm.eps
    ckpt = folder / "model.ckpt"
    torch.save({"model_state": sd, "output_bias": bias, "layer_norm_eps": eps, "steps": 0,
                "converted_from": f"annotated_transformer {a.model}"}, ckpt)
    (folder / "vocab.txt").write_text("\n".join(joey_tokens(model.config.tgt_vocab_size)) + "\n", encoding="utf-8")
    cfg = joey_decode_config(model.config.to_dict(), folder, ckpt, meta["src_lang"], meta["tgt_lang"])
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    print(f"-> {folder}: model.ckpt ({len(sd)} tensors), config.yaml, vocab.txt")
    ver = verify_conversion(a, model, codec)
    (folder / "verify.json").write_text(json.dumps(ver, indent=1), encoding="utf-8")
    print(json.dumps(ver, indent=1))
    if not ver["patched"]["within_tolerance"]: sys.exit("the converted model does not agree with ours")


class JoeyDriver:
    "tools/joeynmt_driver.py in JoeyNMT's venv: the model loaded once, then one JSON request per line."
    def __init__(self, venv, config: Path, threads: int, patched: bool = True):
        cmd = [str(_venv_python(venv)), str(Path(__file__).with_name("joeynmt_driver.py")), str(config)]
        if not patched: cmd.append("--no-patch")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, **thread_env(threads), "PYTHONUNBUFFERED": "1"},
                                  stderr=open(Path(config).with_name("driver.log"), "a"))
        self.ready = self._read()
    def _read(self) -> dict:
        line = self.p.stdout.readline()
        if not line: raise RuntimeError(f"JoeyNMT's driver ended; see {Path(self.p.args[2]).with_name('driver.log')}")
        r = json.loads(line)
        if "error" in r: raise RuntimeError(f"JoeyNMT's driver: {r['error']}")
        return r
    def __call__(self, **q) -> dict:
        self.p.stdin.write(json.dumps(q) + "\n"); self.p.stdin.flush()
        return self._read()
    def close(self):
        try: self.p.stdin.write('{"cmd": "quit"}\n'); self.p.stdin.close()
        except BrokenPipeError: pass
        self.p.wait(timeout=60)

def joey_text(ids: list[int], vocab_size: int) -> str:
    "Our ids as JoeyNMT's tokens, space-separated (a special becomes its JoeyNMT token)."
    order, tokens = joey_order(vocab_size), joey_tokens(vocab_size)
    joey_id = {o: j for j, o in enumerate(order)}
    return " ".join(tokens[joey_id[i]] for i in ids)

def joey_line(ids: list[int], vocab_size: int) -> str:
    "Our `<s> … </s>` source ids as JoeyNMT's source line (it appends </s> itself)."
    return joey_text(ids[:-1], vocab_size)

def from_joey(tokens: list[str], order: list[int], eos: str = "</s>") -> list[int]:
    "JoeyNMT's output tokens (cut after </s>) as our ids without </s>."
    idx = {t: order[j] for j, t in enumerate(JOEY_SPECIALS)}
    out = []
    for t in tokens:
        if t == eos: break
        out.append(idx[t] if t in idx else int(t))
    return out

def _caps(ids: list[list[int]], max_len: int, extra: int = 50) -> list[int]:
    "Our maximum output length of each sentence (§6.1: source + 50, within the positional table)."
    return [min(len(s) + extra, max_len) for s in ids]

def verify_conversion(a, model, codec, n_score: int = 8, n_greedy: int = 100, tol: float = 1e-4) -> dict:
    "Teacher-forced log-probs of JoeyNMT's model against ours (patched and not), greedy ids on val."
    import base64, numpy as np, torch
    from annotated_transformer.data import load_split
    from annotated_transformer.evaluation import encode_sources
    from annotated_transformer.decoding import SearchOptions
    from annotated_transformer.evaluation import decode_corpus
    from annotated_transformer.fast_decoding import fast_beam_search
    folder, order = _decode_dir(a), joey_order(model.config.tgt_vocab_size)
    pairs = load_split("val", download=False)[:max(n_score, n_greedy)]
    src, _ = encode_sources(codec, [s for s, _ in pairs], model.config.max_len)
    tgt = codec.encode_tgt([t for _, t in pairs[:n_score]])
    inv = np.argsort(order)                                           # JoeyNMT id of each of ours
    torch.set_num_threads(1)
    ours_lp = []
    with torch.no_grad():
        for s, t in zip(src[:n_score], tgt):
            s_t, y = torch.tensor([s]), torch.tensor([[s[0], *t]])         # decoder input: <s> t
            mem = model.encode(s_t, model.make_src_mask(s_t))
            h = model.decode(mem, model.make_src_mask(s_t), y, model.make_tgt_mask(y))
            ours_lp.append(model.generator(h)[0].numpy())           # (len + 1, vocab)
    gold = [np.array([*t, s[-1]]) for s, t in zip(src, tgt)]           # next tokens, </s> last
    res = {"sentences_scored": n_score, "tolerance": tol, "split": "val"}
    V = model.config.tgt_vocab_size
    lines = [joey_line(s, V) for s in src[:n_score]]
    targets = [joey_text(t, V) for t in tgt]
    for patched in (True, False):
        drv = JoeyDriver(a.venv, folder / "config.yaml", 1, patched)
        r = drv(cmd="score", lines=lines, targets=targets, threads=1)
        info = drv(cmd="info")
        if patched:
            g = drv(cmd="translate", lines=[joey_line(s, V) for s in src[:n_greedy]], beam_size=1, beam_alpha=-1,
                    batch_size=64, max_output_length=max(_caps(src[:n_greedy], model.config.max_len)), threads=1)
        drv.close()
        full, at_gold = 0.0, 0.0
        for o, j, y in zip(ours_lp, r["logprobs"], gold):
            jl = np.frombuffer(base64.b64decode(j["b64"]), dtype=np.float32).reshape(j["shape"])[:, inv]
            full = max(full, float(np.abs(jl - o).max()))
            rows = np.arange(len(y))
            at_gold = max(at_gold, float(np.abs(jl[rows, y] - o[rows, y]).max()))
        res["patched" if patched else "unpatched"] = {
            "patches": info["patches"], "max_abs_diff_logprob": full, "max_abs_diff_logprob_gold": at_gold,
            "within_tolerance": full <= tol}
    ours_g = decode_corpus(model, src[:n_greedy], SearchOptions(beam_size=1), fast_beam_search, batch_size=64)
    joey_g = [from_joey(t, order) for t in g["tokens"]]
    differ = [k for k, (x, y) in enumerate(zip(ours_g, joey_g)) if x != y]
    gaps = []
    with torch.no_grad():                    # at the first differing step: ours' log-prob of its token − JoeyNMT's
        for k in differ:
            x, y = ours_g[k], joey_g[k]
            n = next(i for i in range(min(len(x), len(y)) + 1) if i >= len(x) or i >= len(y) or x[i] != y[i])
            s_t, pre = torch.tensor([src[k]]), torch.tensor([[src[k][0], *x[:n]]])
            h = model.decode(model.encode(s_t, model.make_src_mask(s_t)), model.make_src_mask(s_t), pre,
                             model.make_tgt_mask(pre))
            lp = model.generator(h)[0, -1]
            eos = src[k][-1]
            gaps.append(round(float(lp[x[n] if n < len(x) else eos] - lp[y[n] if n < len(y) else eos]), 6))
    res["greedy"] = {"sentences": n_greedy, "identical_ids": n_greedy - len(differ), "differing": differ,
                     "logprob_gap_at_first_difference": gaps}
    return res


def _bleu_ids(codec, hyps, refs) -> float:
    import sacrebleu
    return round(sacrebleu.metrics.BLEU().corpus_score([codec.tgt_text(h) for h in hyps], [refs]).score, 2)

def cmd_decode(a):
    "Decode test_2016_flickr with JoeyNMT's beam search and ours on the same weights, interleaved; write JSON."
    import statistics, torch
    from annotated_transformer.pretrained import load_model
    from annotated_transformer.data import load_split
    from annotated_transformer.evaluation import encode_sources
    from annotated_transformer.decoding import SearchOptions
    from annotated_transformer.evaluation import decode_corpus
    from annotated_transformer.fast_decoding import fast_beam_search
    from annotated_transformer.fast_model import make_fast, pack_linears
    from annotated_transformer.runtime import interleaved_times
    from annotated_transformer.benchmarking import machine_record, with_threads
    folder = _decode_dir(a)
    if not (folder / "model.ckpt").is_file(): sys.exit(f"{folder}/model.ckpt not found: run `convert` first")
    model, codec, meta = load_model(a.model)
    fast = pack_linears(make_fast(model))                              # as the CLI's `translate` runs it
    pairs = load_split(a.split, download=False)[:a.n]
    refs = [t for _, t in pairs]
    ids, cut = encode_sources(codec, [s for s, _ in pairs], model.config.max_len)
    opts = SearchOptions(beam_size=a.beam_size, length_penalty=a.alpha)
    order = joey_order(model.config.tgt_vocab_size)
    caps = _caps(ids, model.config.max_len, opts.extra_len)
    sorted_idx = sorted(range(len(ids)), key=lambda i: len(ids[i]))    # our batches: by length, stable
    lines = [joey_line(ids[i], model.config.tgt_vocab_size) for i in sorted_idx]
    max_out = max(caps)
    command = "python tools/joeynmt_compare.py " + " ".join(map(shlex.quote, sys.argv[1:]))
    res = {**machine_record(command), "what": "decoding on the same weights: JoeyNMT 2.3's beam search vs ours",
           "model": a.model, "split": a.split, "sentences": len(ids), "truncated_sources": len(cut),
           "settings": {"beam_size": a.beam_size, "length_penalty": a.alpha, "batch_size": a.batch_size,
                        "rounds": a.rounds, "warmup": 1, "threads": a.threads,
                        "joeynmt": {"max_output_length": max_out, "min_output_length": 0,
                                    "batch_type": "sentence", "input_order": "ours, sorted by source length",
                                    "timed": "its predict() call, as the driver measures it"},
                        "ours": {"call": "decode_corpus(pack_linears(make_fast(model)), ids, SearchOptions("
                                         "beam_size, length_penalty), fast_beam_search, batch_size)",
                                 "extra_len": opts.extra_len,
                                 "timed": "the call, in this process"}},
           "deviations": DECODE_DEVIATIONS, "mapping": DECODE_MAPPING,
           "cpu_vendor": vendor_and_cpu(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "versions": {"ours": env_info(sys.executable, 1)}, "rows": [], "outputs": {}}
    verify = folder / "verify.json"
    if verify.is_file(): res["verification"] = json.loads(verify.read_text())
    for T in a.threads:
        drv = JoeyDriver(a.venv, folder / "config.yaml", T)
        res["versions"]["joeynmt_venv"] = {k: v for k, v in drv(cmd="info").items()
                                          if k in ("joeynmt", "torch", "python", "cpu_capability")}
        joey_s, outs = [], {}
        def joey():
            r = drv(cmd="translate", lines=lines, beam_size=a.beam_size, beam_alpha=a.alpha,
                    batch_size=a.batch_size, max_output_length=max_out, min_output_length=0, threads=T)
            if "tokens" not in r: raise RuntimeError(r)
            joey_s.append(r["seconds"])
            hyps = [None] * len(ids)
            for i, t in zip(sorted_idx, r["tokens"]): hyps[i] = from_joey(t, order)
            outs["joeynmt"] = hyps
        def ours(): outs["ours"] = decode_corpus(fast, ids, opts, fast_beam_search, batch_size=a.batch_size)
        print(f"threads {T}: warm-up + {a.rounds} rounds of JoeyNMT and ours, in turn", flush=True)
        load = [os.getloadavg()[0]]                                    # a busy machine shows here
        wall = interleaved_times({"joeynmt": joey, "ours": with_threads(T, ours)}, a.rounds, 1)
        load.append(os.getloadavg()[0])
        drv.close()
        times = {"joeynmt": joey_s[1:], "ours": wall["ours"]}            # JoeyNMT: its own time, warm-up dropped
        med = {k: statistics.median(v) for k, v in times.items()}
        same = sum(x == y for x, y in zip(outs["ours"], outs["joeynmt"]))
        same_text = sum(codec.tgt_text(x) == codec.tgt_text(y) for x, y in zip(outs["ours"], outs["joeynmt"]))
        ratios = [j / o for j, o in zip(times["joeynmt"], times["ours"])]
        for side in ("joeynmt", "ours"):
            h = outs[side]
            res["rows"].append({
                "engine": side, "threads": T, "seconds": [round(t, 3) for t in times[side]],
                "median_s": round(med[side], 3), "sentences_per_s": round(len(ids) / med[side], 2),
                "bleu": _bleu_ids(codec, h, refs), "tokens": sum(map(len, h)),
                "longest_output": max(map(len, h)) + 1, "at_cap": sum(len(x) + 1 >= c for x, c in zip(h, caps)),
                **({"wall_s_with_pipe": [round(t, 3) for t in wall["joeynmt"]]} if side == "joeynmt" else {})})
        res["rows"].append({"engine": "ours ÷ joeynmt", "threads": T, "speedup_median_of_rounds":
                            round(statistics.median(ratios), 2), "speedup_of_medians": round(med["joeynmt"] /
                            med["ours"], 2), "identical_ids": same, "identical_text": same_text,
                            "of": len(ids), "loadavg_1min_before_after": [round(v, 2) for v in load]})
        res["outputs"][str(T)] = {"differing": [k for k, (x, y) in enumerate(zip(outs["ours"], outs["joeynmt"]))
                                                if x != y]}
        print(json.dumps(res["rows"][-3:], indent=1), flush=True)
    out = Path(a.out)
    out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"-> {out}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    def common(s, venv=True):
        s.add_argument("--work", default=str(WORK), help=f"folder for everything (default {WORK})")
        if venv: s.add_argument("--venv", default=str(WORK / "venv"), help="JoeyNMT's venv (default WORK/venv)")
        return s
    s = sub.add_parser("setup", help="create JoeyNMT's venv and install it from the index")
    s.add_argument("--venv", default=str(WORK / "venv"), help=f"the venv to create (default {WORK / 'venv'})")
    s.set_defaults(func=cmd_setup)
    s = common(sub.add_parser("prepare", help="Multi30k de-en for JoeyNMT, its BPE and config.yaml"))
    s.add_argument("--recipe", default="small-long", help="our recipe to match (default small-long, the runs stored)")
    s.add_argument("--batch-size", type=int, default=None,
                   help="JoeyNMT batch_size in tokens (default: our recipe's batch_tokens)")
    s.add_argument("--validation-freq", type=int, default=1000, help="JoeyNMT updates between validations "
                   "(each greedy-decodes val inside the wall time, minutes on one thread while the model is young; "
                   "default 1000, JoeyNMT's own: the whole budget trains, and the stop saves the weights)")
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=cmd_prepare)
    for name, func, what in (("run-joey", cmd_run_joey, "JoeyNMT"), ("run-ours", cmd_run_ours, "ours")):
        s = common(sub.add_parser(name, help=f"train {what} for M minutes on T threads, score val, write JSON"))
        s.add_argument("--minutes", type=float, required=True)
        s.add_argument("--threads", type=int, required=True)
        s.add_argument("--run-dir", default=None, help="default WORK/runs/ENGINE-Mmin-Tthr")
        s.add_argument("--out", default=None, help="the JSON (default RUN_DIR/result.json)")
        s.add_argument("--cpu", type=int, default=None, help="pin the trainer to this CPU (e.g. to run both at once, "
                       "one per core; default: not pinned)")
        if name == "run-ours":
            s.add_argument("--recipe", default="small-long")
            s.add_argument("--seed", type=int, default=0)
            s.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                           help="our training precision (bf16: autocast, chapter 11; default fp32)")
        s.set_defaults(func=func)
    s = common(sub.add_parser("convert", help="our shipped model as a JoeyNMT checkpoint, config and vocabulary; "
                              "verified by teacher-forced log-probs and greedy ids"))
    s.add_argument("--model", default="de-en", help="a shipped model (default de-en)")
    s.set_defaults(func=cmd_convert)
    s = common(sub.add_parser("decode", help="JoeyNMT's beam search and ours on the same weights, interleaved"))
    s.add_argument("--model", default="de-en", help="the converted model (default de-en)")
    s.add_argument("--split", default="test_2016_flickr")
    s.add_argument("-n", type=int, default=1000, help="the first N sentences (default 1000: all)")
    s.add_argument("--threads", type=int, nargs="+", default=[1], help="thread counts, each side alike")
    s.add_argument("--rounds", type=int, default=3, help="timed rounds after one warm-up (default 3)")
    s.add_argument("--beam-size", type=int, default=4)
    s.add_argument("--alpha", type=float, default=0.6)
    s.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    s.add_argument("--out", default="nbs/results/joeynmt_decode.json")
    s.set_defaults(func=cmd_decode)
    s = sub.add_parser("compare", help="a markdown table of result JSONs (the first is the ratio's base)")
    s.add_argument("results", nargs="+")
    s.set_defaults(func=cmd_compare)
    a = p.parse_args(argv)
    a.func(a)

if __name__ == "__main__":
    main()
