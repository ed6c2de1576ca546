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
* ours: `annotated-transformer train --recipe small --device cpu --checkpoint-dir DIR` with the same environment
  (the CLI has no thread flag; torch takes OMP_NUM_THREADS), SIGTERM after M minutes (it saves a checkpoint), then
  `annotated-transformer evaluate --checkpoint DIR --split val --beam-size 4 --length-penalty 0.6`.
Both runs' M minutes start when the process starts, so each pays its own start-up (ours learns its BPE then;
JoeyNMT's SentencePiece model is learnt by `prepare`, outside the clock; `startup_s` in the JSON says how long each
took before its first update). tokens/s = real target tokens trained / seconds from the first update to the stop
(validation included, as it happens); `engine_tokens_per_s` is what the engine itself logs.

Deviations that JoeyNMT's options cannot remove are listed in `DEVIATIONS` and written into every result.
"""
import argparse, gzip, json, os, platform, re, shlex, signal, subprocess, sys, time
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

def cpu_vendor() -> str:
    "vendor_id and model name from /proc/cpuinfo."
    info = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        k, _, v = line.partition(":")
        info.setdefault(k.strip(), v.strip())
    return f"{info.get('vendor_id', platform.processor())} / {info.get('model name', '?')}"

def env_info(python, threads: int) -> dict:
    "Versions, CPU and torch's view of it, as the engine's own interpreter sees them with `threads`."
    env = {**os.environ, **thread_env(threads)}
    out = subprocess.run([str(python), "-c", _ENV_INFO], check=True, capture_output=True, text=True, env=env)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    return {**info, "cpu_vendor": cpu_vendor(), "nproc": os.cpu_count()}

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
    s.add_argument("--recipe", default="small", help="our recipe to match (default small)")
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
            s.add_argument("--recipe", default="small")
            s.add_argument("--seed", type=int, default=0)
            s.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                           help="our training precision (bf16: autocast, chapter 11; default fp32)")
        s.set_defaults(func=func)
    s = sub.add_parser("compare", help="a markdown table of result JSONs (the first is the ratio's base)")
    s.add_argument("results", nargs="+")
    s.set_defaults(func=cmd_compare)
    a = p.parse_args(argv)
    a.func(a)

if __name__ == "__main__":
    main()
