"""The GPU check that tools/gpu_check.sh runs: every GPU path of the command line, one run, one JSON.

Steps (each the CLI as a user runs it, `python -m annotated_transformer ...`, with a time cap; a failed step is
recorded and the next one runs):
  probe           torch, CUDA, cuDNN and NCCL versions, the GPU, where the package is imported from
  install         `pip install -e .` (skipped where the package imports from this tree, or GPU_CHECK_NO_INSTALL=1)
  train_multi30k  the `base` recipe on Multi30k for --minutes of training, stopped by SIGTERM (which saves a checkpoint)
  evaluate_val    validation BLEU of that checkpoint
  train_bf16      a copy-task run under bf16 autocast
  train_fp16      the same under fp16 autocast with a GradScaler (a CPU refuses it: skipped, with the CLI's reason)
  torchrun_cli    the copy task under `torchrun --nproc_per_node 1` (at world size 1 the CLI joins no process group)
  torchrun_ddp    under torchrun, a process group (NCCL on a GPU, gloo in --dry-run) and two DDP updates
  bench           `bench --json --device D` (--quick in --dry-run)
  bench_translate `bench --translate` on the device, where the CLI can (else skipped, saying why)
  translate       a timed `translate --model de-en --device D` over test_2016_flickr: sentences/s

--dry-run runs the same steps on the CPU with tiny sizes (the `tiny` recipe for 12 s of training, a few updates,
a handful of sentences, `bench --quick`), in under two minutes on two cores.
The JSON (OUTDIR/gpu_check_<gpu>.json, or gpu_check_dryrun.json) is rewritten after each step, atomically, so a run
cut short still leaves what it measured; `complete` says whether every step ran. Exit status: 0 when every step
passed or was skipped with a reason, 1 when one failed, 2 when the machine or the data is not usable.
Usage: bash tools/gpu_check.sh [--dry-run] [--minutes M] [--budget S] [--keep] [OUTDIR]"""
import argparse, datetime, gzip, json, math, os, re, shlex, shutil, signal, subprocess, sys, tempfile, time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA_ENV = "ANNOTATED_TRANSFORMER_DATA"
MULTI30K = tuple(f"{split}.{lang}.gz" for split in ("train", "val", "test_2016_flickr") for lang in ("de", "en"))


@dataclass
class Sizes:
    "What each step runs: one set for a GPU, one for the CPU rehearsal (--dry-run)."
    device: str              # --device of every step
    minutes: float           # wall minutes of the Multi30k run (its "training" line to SIGTERM), all 29,000 pairs
    recipe: str              # its recipe
    val_sentences: int       # sentences of val scored (1,014: all of it)
    copy_preset: str         # the precision steps' model (the copy task's --preset)
    copy_steps: int          # their updates
    ddp_steps: int           # updates of the torchrun step
    bench_quick: bool        # `bench --quick`
    translate_sentences: int # sentences of test_2016_flickr translated (1,000: all of it)
    budget_s: float          # the whole run's wall-clock budget: later steps get what is left
    threads: int|None        # OMP_NUM_THREADS for every step (None: torch's default)
    ct2_compute: str         # --compute-type of the `translate --engine ctranslate2` step


GPU = Sizes(device="cuda", minutes=4, recipe="base", val_sentences=1014, copy_preset="base",
            copy_steps=100, ddp_steps=50, bench_quick=False, translate_sentences=1000, budget_s=570, threads=None,
            ct2_compute="float16")
DRY = Sizes(device="cpu", minutes=0.2, recipe="tiny", val_sentences=16, copy_preset="tiny",
            copy_steps=5, ddp_steps=6, bench_quick=True, translate_sentences=16, budget_s=115, threads=1,
            ct2_compute="int8")
# seconds, each step at most (and at most what the budget has left)
CAPS = dict(probe=60, install=120, evaluate_val=120, train_bf16=90, train_fp16=90, torchrun_cli=120,
            torchrun_ddp=90, bench=180, bench_translate=180, translate=120,
            translate_ctranslate2=120)
GRACE_S = 60      # after SIGTERM: time to save a checkpoint and leave, then SIGKILL
MIN_STEP_S = 10   # a step the budget leaves less than this is not run, and counts as failed


def _tail(text: str, n: int=15) -> list[str]:
    "The last `n` non-empty lines, a progress bar's carriage returns counted as line ends."
    return [l for l in re.split(r"[\r\n]+", text) if l.strip()][-n:]

def _last_json(stdout: str) -> dict|None:
    "The last line of stdout that is a JSON object (a `--json` result), else None."
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try: return json.loads(line)
            except ValueError: return None
    return None

def _last_number(pattern: str, text: str) -> float|None:
    "The number in the last match of `pattern` (one group; thousands commas allowed), else None."
    found = re.findall(pattern, text)
    return float(found[-1].replace(",", "")) if found else None


class Interrupted(Exception):
    "SIGTERM or SIGINT reached this script: stop the step, write what we have, leave."


class Check:
    "The run: its sizes, environment, budget, work folder and the JSON it keeps rewriting."
    def __init__(self, args, sizes: Sizes, python: str, work: Path):
        self.args, self.sizes, self.python, self.work = args, sizes, python, work
        self.t0 = time.monotonic()
        self.deadline = self.t0 + sizes.budget_s
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))   # this tree's package
        self.env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        if sizes.threads: self.env["OMP_NUM_THREADS"] = str(sizes.threads)
        self.env["XDG_CACHE_HOME"] = str(work / "cache")     # the engines' export cache: this run's own
        self.steps: dict[str, dict] = {}
        self.record = dict(kind="gpu_check", mode="dry-run" if args.dry_run else "gpu",
                           command=shlex.join(["bash", "tools/gpu_check.sh", *sys.argv[1:]]),
                           date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                           git=_git(), nvidia_smi=_nvidia_smi(), torch=None, cuda=None, python=python,
                           data_root=os.environ[DATA_ENV], sizes=asdict(sizes), complete=False, failed=[],
                           wall_s=None, steps=self.steps)
        self.out = None

    def at(self, *parts) -> list[str]:
        "A command of the package's CLI, as this run starts it."
        return [self.python, "-m", "annotated_transformer", *map(str, parts)]

    def left(self) -> float: return self.deadline - time.monotonic()

    def write(self):
        "Rewrite the JSON atomically (temporary file in the same folder, then rename)."
        # not runtime.atomic_file: this script imports neither torch nor the package, so it can record that they fail
        self.record["wall_s"] = round(time.monotonic() - self.t0, 1)
        self.record["failed"] = [k for k, s in self.steps.items() if s["status"] == "failed"]
        fd, tmp = tempfile.mkstemp(prefix=f".{self.out.name}.", dir=self.out.parent)
        with os.fdopen(fd, "w") as f: f.write(json.dumps(self.record, indent=1, ensure_ascii=False) + "\n")
        os.replace(tmp, self.out)

    def skip(self, name: str, reason: str, **rec) -> dict:
        self.steps[name] = dict(status="skipped", reason=reason, **rec)
        print(f"gpu_check: {name}: skipped ({reason})", file=sys.stderr, flush=True)
        self.write()
        return self.steps[name]

    def run(self, name: str, argv: list[str], judge, cap: float|None=None, env: dict|None=None,
            expected_stop: bool=False, clock_from: str|None=None) -> dict:
        """Run one step under a time cap (SIGTERM at the cap, SIGKILL `GRACE_S` later); `judge(rec, out, err)`
        adds the parsed outputs to `rec` and returns None when it passed, else why it failed (or ("skipped", why)).
        With `clock_from`, the cap counts from the first stderr line that starts with it (a run's "training "
        line, once its data are ready), so a slow start on a busy machine does not eat the run's minutes."""
        cap = min(cap or CAPS[name], self.left() - (GRACE_S if expected_stop else 0))
        rec = dict(command=shlex.join(argv), status=None, exit_status=None, wall_s=None, cap_s=round(cap, 1),
                   stopped_at_cap=False)
        if cap < MIN_STEP_S:                  # not run: the check is incomplete, so this counts as a failure
            why = f"not run: out of the time budget ({self.sizes.budget_s:.0f} s)"
            self.steps[name] = dict(rec, status="failed", reason=why)
            print(f"gpu_check: {name}: {why}", file=sys.stderr, flush=True)
            self.write()
            return self.steps[name]
        print(f"gpu_check: {name}: {rec['command']} (at most {cap:.0f} s)", file=sys.stderr, flush=True)
        out_f, err_f = self.work / f"{name}.out", self.work / f"{name}.err"
        t = time.monotonic()
        with open(out_f, "w") as o, open(err_f, "w") as e:
            p = subprocess.Popen(argv, stdout=o, stderr=e, cwd=self.work, env=env or self.env, start_new_session=True)
            try:
                rec["clock_from_s"] = round(_started(p, err_f, clock_from, self.left() - cap - GRACE_S), 2)
                try: rc = p.wait(timeout=cap + rec["clock_from_s"])
                except subprocess.TimeoutExpired:
                    rec["stopped_at_cap"] = True
                    rc = _stop(p)
            except Interrupted as x:
                rec.update(status="failed", reason=f"interrupted by {x}", exit_status=_stop(p),
                           wall_s=round(time.monotonic() - t, 2))
                self.steps[name] = rec
                raise
        rec.update(exit_status=rc, wall_s=round(time.monotonic() - t, 2))
        out, err = out_f.read_text(errors="replace"), err_f.read_text(errors="replace")
        try: verdict = judge(rec, out, err)
        except Exception as x: verdict = f"could not read its output: {type(x).__name__}: {x}"
        if verdict is None: rec["status"] = "ok"
        elif isinstance(verdict, tuple): rec.update(status=verdict[0], reason=verdict[1])
        else: rec.update(status="failed", reason=verdict)
        if rec["status"] != "ok": rec["stderr_tail"] = _tail(err)
        self.steps[name] = rec
        print(f"gpu_check: {name}: {rec['status']} in {rec['wall_s']} s"
              + (f" ({rec['reason']})" if rec.get("reason") else ""), file=sys.stderr, flush=True)
        self.write()
        return rec


def _started(p: subprocess.Popen, err_f: Path, prefix: str|None, most: float) -> float:
    "Seconds until `p` writes a stderr line starting with `prefix` (0 without one), waiting at most `most`."
    if prefix is None: return 0.0
    t = time.monotonic()
    while time.monotonic() - t < most and p.poll() is None:
        if any(l.startswith(prefix) for l in err_f.read_text(errors="replace").splitlines()): break
        time.sleep(0.2)
    return max(0.0, time.monotonic() - t)

def _stop(p: subprocess.Popen) -> int:
    "SIGTERM to the step's process group (a run saves its checkpoint), SIGKILL if it is still there after GRACE_S."
    with_group = lambda sig: os.killpg(p.pid, sig) if p.poll() is None else None
    try: with_group(signal.SIGTERM)
    except ProcessLookupError: pass
    try: return p.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        try: with_group(signal.SIGKILL)
        except ProcessLookupError: pass
        return p.wait()

def _git() -> dict:
    "The commit of this tree and whether it has uncommitted changes (None where it is no git checkout)."
    def git(*a):
        return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True, timeout=30)
    try:
        head = git("rev-parse", "HEAD")
        if head.returncode: return dict(commit=None, reason=_tail(head.stderr, 1))
        return dict(commit=head.stdout.strip(), dirty=bool(git("status", "--porcelain").stdout.strip()))
    except (OSError, subprocess.TimeoutExpired) as e: return dict(commit=None, reason=str(e))

def _nvidia_smi() -> str|None:
    "nvidia-smi's line for each GPU: name, driver, memory (None without nvidia-smi)."
    if not shutil.which("nvidia-smi"): return None
    r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else f"nvidia-smi failed ({r.returncode}): {r.stderr.strip()}"

def _slug(name: str) -> str: return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


# --- what runs inside the steps' processes (this file, with a flag: `--probe`, `--ddp-worker DEVICE`)

def probe_versions():
    "Print what this Python has: torch, CUDA, cuDNN, NCCL, the GPU, where the package comes from (one JSON line)."
    import dataclasses, torch, annotated_transformer as at
    from annotated_transformer.benchmarking import TranslationBench
    cuda = torch.cuda.is_available()
    print(json.dumps(dict(
        torch=torch.__version__, cuda=torch.version.cuda, cuda_available=cuda,
        gpu=torch.cuda.get_device_name(0) if cuda else None,
        capability=".".join(map(str, torch.cuda.get_device_capability(0))) if cuda else None,
        bf16_supported=torch.cuda.is_bf16_supported() if cuda else None,
        cudnn=torch.backends.cudnn.version() if cuda else None,
        nccl=".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
        package=at.__version__, package_dir=os.path.dirname(at.__file__),
        translate_bench_has_device=any(f.name == "device" for f in dataclasses.fields(TranslationBench)))))

def ddp_worker(device: str):
    """Under torchrun: join a process group with the backend the runtime picks (NCCL on a GPU, gloo on a CPU), then
    two DDP updates of the tiny model through `LogitsModel`, as `fit` wraps it. (At world size 1 the CLI joins no
    group, so this is the NCCL check one GPU allows.) Prints one JSON line from each rank."""
    import torch, torch.distributed as dist, torch.nn.functional as F
    from annotated_transformer.runtime import default_device
    from annotated_transformer.model import create_transformer
    from annotated_transformer.training import LogitsModel
    from annotated_transformer.batching import token_batch_loader
    from annotated_transformer.copy_task import copy_pairs, COPY_VOCAB_SIZE as V
    dev = default_device(device, int(os.environ.get("LOCAL_RANK", "0")))
    if dev.type == "cuda": torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        t = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(t)                                         # 1 + 2 + … + world on every rank
        torch.manual_seed(0)
        net = torch.nn.parallel.DistributedDataParallel(
            LogitsModel(create_transformer(V, V, "tiny").to(dev), nonpad=True),
            device_ids=[dev.index] if dev.type == "cuda" else None)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        losses = []
        for b, _ in zip(token_batch_loader(copy_pairs(200, seed=rank), 400, seed=0), range(2)):
            logits, labels = net(b.to(dev))                        # (n_tokens, V), (n_tokens,)
            loss = F.cross_entropy(logits.float(), labels)
            opt.zero_grad()
            loss.backward()                                        # DDP all-reduces the gradients here
            opt.step()
            losses.append(loss.item())
        sums = torch.stack([p.double().sum() for p in net.parameters()])
        gathered = [torch.empty_like(sums) for _ in range(world)]
        dist.all_gather(gathered, sums)                            # as `check_replicas_in_sync` does
        in_sync = all(torch.equal(g, gathered[0]) for g in gathered)
        print(json.dumps(dict(backend=dist.get_backend(), rank=rank, world_size=world, device=str(dev),
                              all_reduce=t.tolist(), all_reduce_ok=t.tolist() == [world * (world + 1) / 2] * 3,
                              losses=losses, finite=all(map(math.isfinite, losses)), replicas_in_sync=in_sync)),
              flush=True)
    finally: dist.destroy_process_group()


# --- the steps: each judge reads its step's output into `rec` and says whether it passed

def probe(c: Check):
    def judge(rec, out, err):
        if rec["exit_status"]: return "the package or torch does not import"
        rec["found"] = info = _last_json(out)
        c.record.update(torch=info["torch"], cuda=info["cuda"])
        if c.sizes.device == "cuda" and not info["cuda_available"]:
            return f"torch {info['torch']} sees no CUDA GPU (torch.version.cuda={info['cuda']})"
    return c.run("probe", [c.python, str(Path(__file__).resolve()), "--probe"], judge)

def install(c: Check):
    "`pip install -e .`, unless the package already imports from this tree (or GPU_CHECK_NO_INSTALL=1)."
    if os.environ.get("GPU_CHECK_NO_INSTALL"): return c.skip("install", "GPU_CHECK_NO_INSTALL is set")
    code = "import annotated_transformer as a, os; print(os.path.dirname(a.__file__))"
    where = subprocess.run([c.python, "-c", code], capture_output=True, text=True, cwd="/", timeout=60).stdout.strip()
    if where and Path(where).resolve() == REPO / "annotated_transformer":
        return c.skip("install", f"the package already imports from this tree ({where})")
    # offline machines: no retries, then without build isolation or dependencies (they must be there already)
    pip = f"{shlex.quote(c.python)} -m pip install --retries 0 --timeout 10"
    cmd = f"{pip} -e . || {pip} --no-build-isolation --no-deps -e ."
    return c.run("install", ["bash", "-c", f"cd {shlex.quote(str(REPO))} && ({cmd})"],
                 lambda rec, out, err: "pip install -e . failed" if rec["exit_status"] else None)

def train_multi30k(c: Check) -> Path|None:
    "The recipe on Multi30k for `minutes` of training (data ready to SIGTERM): the CLI saves a checkpoint, says where."
    s, ck_dir = c.sizes, c.work / "train_multi30k"
    argv = c.at("train", "--recipe", s.recipe, "--device", s.device, "--checkpoint-dir", ck_dir, "--json")
    found = {}
    def judge(rec, out, err):
        plan = [l for l in err.splitlines() if l.startswith("training ")]
        stop = re.search(r"stopped by SIGTERM after update (\d+); saved checkpoint (\S+?)\.?(?:\s|$)", err)
        cks = sorted(ck_dir.glob("step_*.pt"))
        ck = (c.work / stop.group(2)) if stop else (cks[-1] if cks else None)
        hist = _history(ck_dir / "history.csv")
        rec.update(recipe=s.recipe, minutes=s.minutes, plan=plan[-1] if plan else None,
                   updates=int(stop.group(1)) if stop else hist.get("step"),
                   tokens_per_s=_last_number(r"tok_s=([\d,.]+)", err), last_train_loss=hist.get("train_loss"),
                   last_val_loss=hist.get("val_loss"), checkpoint=str(ck) if ck else None, result=_last_json(out))
        if ck is not None: found["ck"] = ck
        if rec["exit_status"] == 0: return None                 # finished its epochs within the minutes
        if rec["stopped_at_cap"] and stop: return None          # stopped by SIGTERM as planned, checkpoint saved
        return ("stopped at the time limit before its first checkpoint" if rec["stopped_at_cap"]
                else f"exit status {rec['exit_status']}")
    c.run("train_multi30k", argv, judge, cap=s.minutes * 60, expected_stop=True, clock_from="training ")
    return found.get("ck")

def _history(path: Path) -> dict:
    "The last row of a run's history.csv (step, train_loss) with the last validation loss it logged."
    if not path.exists(): return {}
    rows = [l.split(",") for l in path.read_text().splitlines()[1:] if l.strip()]
    if not rows: return {}
    vals = [r[3] for r in rows if len(r) > 3 and r[3]]
    return dict(step=int(rows[-1][0]), train_loss=float(rows[-1][1]), val_loss=float(vals[-1]) if vals else None)

def evaluate_val(c: Check, ck: Path|None):
    if ck is None: return c.skip("evaluate_val", "the Multi30k run saved no checkpoint (see train_multi30k)")
    def judge(rec, out, err):
        res = _last_json(out)
        if rec["exit_status"] or res is None: return f"exit status {rec['exit_status']}"
        one = res["sets"][0]
        rec.update(split=one["set"], sentences=one["sentences"], bleu=one["bleu"], chrf=one["chrf"],
                   decode_s=one["decode_s"], beam_size=res["beam_size"], signature=one["bleu_signature"])
    return c.run("evaluate_val", c.at("evaluate", "--checkpoint", ck, "--split", "val", "--max-sentences",
                                      c.sizes.val_sentences, "--device", c.sizes.device, "--json"), judge)

def train_precision(c: Check, precision: str):
    s = c.sizes
    def judge(rec, out, err):
        refused = re.search(r"error: (precision='fp16' needs a CUDA device.*)", err)
        if s.device == "cpu" and refused: return ("skipped", f"the CLI refuses fp16 on a CPU: {refused.group(1)}")
        res = _last_json(out)
        if rec["exit_status"] or res is None: return f"exit status {rec['exit_status']}"
        loss, secs = res["train_loss"], res["seconds"]
        rec.update(precision=res["precision"], steps=res["steps"], train_loss=loss, exact_match=res["exact_match"],
                   tokens_per_s=round(res["tokens"] / secs) if secs else None, train_seconds=secs)
        if res["precision"] != precision: return f"ran in {res['precision']}, not {precision}"
        if not math.isfinite(loss): return f"training loss {loss}"
    return c.run(f"train_{precision}", c.at("train", "--task", "copy", "--preset", s.copy_preset, "--precision",
                                            precision, "--max-steps", s.copy_steps, "--device", s.device, "--json"),
                 judge)

def torchrun_cli(c: Check):
    "The copy task under torchrun, one process: the launch, the environment, the rank's device."
    s, ck_dir = c.sizes, c.work / "torchrun_cli"
    argv = [c.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
            "-m", "annotated_transformer", "train", "--task", "copy", "--max-steps", str(s.ddp_steps),
            "--max-train-pairs", "1000", "--device", s.device, "--checkpoint-dir", str(ck_dir), "--json"]
    def judge(rec, out, err):
        res = _last_json(out)
        rec["result"] = res
        if rec["exit_status"] or res is None: return f"exit status {rec['exit_status']}"
        if res["steps"] != s.ddp_steps or res["world_size"] != 1:
            return f"{res['steps']} updates in a world of {res['world_size']}, expected {s.ddp_steps} in a world of 1"
    return c.run("torchrun_cli", argv, judge)

def torchrun_ddp(c: Check):
    "`ddp_worker` under torchrun, one process: a process group (NCCL on a GPU, gloo on a CPU) and DDP updates."
    want = "nccl" if c.sizes.device == "cuda" else "gloo"
    argv = [c.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
            str(Path(__file__).resolve()), "--ddp-worker", c.sizes.device]
    def judge(rec, out, err):
        res = _last_json(out)
        nccl = re.findall(r"NCCL version (\S+)", out + err)          # NCCL_DEBUG=VERSION: once, at its start
        rec.update(nccl_version=nccl[-1] if nccl else None, result=res)
        if rec["exit_status"] or res is None: return f"exit status {rec['exit_status']}"
        if res["backend"] != want: return f"backend {res['backend']}, expected {want}"
        bad = [k for k in ("all_reduce_ok", "finite", "replicas_in_sync") if not res[k]]
        if bad: return f"failed: {', '.join(bad)}"
    return c.run("torchrun_ddp", argv, judge, env={**c.env, "NCCL_DEBUG": "VERSION"})

def bench(c: Check):
    def judge(rec, out, err):
        res = _last_json(out)
        if rec["exit_status"] or res is None: return f"exit status {rec['exit_status']}"
        rec["result"] = res
        rec.update({k: res.get(k) for k in ("train_speedup_vs_nn_transformer", "bf16_speedup",
                                            "greedy_cached_speedup", "meets_targets", "seconds")})
    return c.run("bench", c.at("bench", "--json", "--device", c.sizes.device,
                               *(["--quick"] if c.sizes.bench_quick else [])), judge)

def bench_translate(c: Check):
    "`bench --translate` times ours and CTranslate2 on CPU threads; run it here only once it takes a device."
    probed = (c.steps.get("probe") or {}).get("found") or {}
    if not probed.get("translate_bench_has_device"):
        return c.skip("bench_translate", "`bench --translate` has no device: TranslationBench times CPU threads "
                      "only and ignores --device; the `translate` step times the device instead")
    n = c.sizes.translate_sentences
    def judge(rec, out, err):
        res = _last_json(out)
        if rec["exit_status"] or res is None: return f"exit status {rec['exit_status']}"
        rec["result"] = res
    return c.run("bench_translate", c.at("bench", "--translate", "--device", c.sizes.device, "--n-sentences", n,
                                         "--repeats", 1, "--latency-sentences", 0, "--json"), judge)

def translate(c: Check, name: str="translate", engine: tuple=()):
    "A timed `translate` of the first n sentences of test_2016_flickr (German) with the shipped de-en model."
    n, src, hyp = c.sizes.translate_sentences, c.work / "test_2016_flickr.de", c.work / f"{name}.hyp.en"
    with gzip.open(Path(os.environ[DATA_ENV]) / "multi30k" / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        lines = [l for _, l in zip(range(n), f)]
    src.write_text("".join(lines), encoding="utf-8")
    def judge(rec, out, err):
        if rec["exit_status"]: return f"exit status {rec['exit_status']}"
        got = len(hyp.read_text(encoding="utf-8").splitlines()) if hyp.exists() else 0
        rec.update(sentences=len(lines), translated=got,
                   sentences_per_s=round(len(lines) / rec["wall_s"], 2),   # the whole command: load, init, decode
                   # the command's own last line: sentences/s of the translating, and the engine
                   decode_sentences_per_s=_last_number(r"\(([\d,.]+) sentences/s\)", err),
                   engine_line=next((l for l in reversed(err.splitlines()) if "sentences/s" in l), None))
        if got != len(lines): return f"{got} translations for {len(lines)} sentences"
    return c.run(name, c.at("translate", "--model", "de-en", "--device", c.sizes.device, *engine, "--input", src,
                            "--output", hyp), judge)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--probe"]: return probe_versions()
    if argv[:1] == ["--ddp-worker"]: return ddp_worker(*argv[1:2])
    p = argparse.ArgumentParser(prog="tools/gpu_check.sh", description=__doc__.split("\n")[0])
    p.add_argument("outdir", nargs="?", default=str(REPO / "nbs" / "results"), help="where the JSON goes")
    p.add_argument("--dry-run", action="store_true", help="the same steps on the CPU, tiny sizes (under 2 minutes)")
    p.add_argument("--minutes", type=float, help=f"minutes the Multi30k run trains (default {GPU.minutes}; "
                                                 f"--dry-run {DRY.minutes})")
    p.add_argument("--budget", type=float, help=f"seconds for the whole check; later steps get what is left "
                                                f"(default {GPU.budget_s:.0f}; --dry-run {DRY.budget_s:.0f})")
    p.add_argument("--keep", action="store_true", help="keep the work folder (checkpoints, logs) and print it")
    args = p.parse_args(argv)
    def refuse(why: str) -> int:
        print(f"gpu_check: {why}", file=sys.stderr)
        return 2
    root = os.environ.get(DATA_ENV)
    if not root: return refuse(f"${DATA_ENV} is not set: set it to the data root, a folder holding multi30k/")
    missing = [n for n in MULTI30K if not (Path(root) / "multi30k" / n).exists()]
    if missing: return refuse(f"${DATA_ENV}={root} lacks multi30k/ files: {', '.join(missing)}")
    os.environ[DATA_ENV] = str(Path(root).resolve())          # the steps run in a work folder of their own
    if not args.dry_run and not shutil.which("nvidia-smi"):
        return refuse("no nvidia-smi here, so no NVIDIA GPU: run on a GPU machine, or with --dry-run on a CPU")
    sizes = DRY if args.dry_run else GPU
    sizes = Sizes(**{**asdict(sizes), **{k: v for k, v in dict(minutes=args.minutes, budget_s=args.budget).items()
                                         if v is not None}})
    python = sys.executable                  # tools/gpu_check.sh chose it ($PYTHON, else python, else python3)
    work = Path(tempfile.mkdtemp(prefix="gpu_check."))
    c = Check(args, sizes, python, work)
    gpu = (c.record["nvidia_smi"] or "").split(",")[0]
    outdir = Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    c.out = outdir / f"gpu_check_{'dryrun' if args.dry_run else _slug(gpu)}.json"
    def interrupted(signum, frame): raise Interrupted(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGINT): signal.signal(sig, interrupted)
    try:
        c.write()
        probe(c)
        install(c)
        evaluate_val(c, train_multi30k(c))
        train_precision(c, "bf16")
        train_precision(c, "fp16")
        torchrun_cli(c)
        torchrun_ddp(c)
        bench(c)
        bench_translate(c)
        translate(c)
        # the deploy engine on the device: CTranslate2 in float16 on a GPU (int8 in the rehearsal)
        translate(c, "translate_ctranslate2", ("--engine", "ctranslate2", "--compute-type", c.sizes.ct2_compute))
        c.record["complete"] = True
    except Interrupted as e:
        c.record["interrupted"] = f"stopped by {e} after {time.monotonic() - c.t0:.0f} s"
    finally:
        c.write()
        if args.keep: print(f"gpu_check: work folder kept: {work}", file=sys.stderr)
        else: shutil.rmtree(work, ignore_errors=True)
    failed = c.record["failed"]
    print(f"gpu_check: wrote {c.out} in {c.record['wall_s']} s; "
          + (f"FAILED: {', '.join(failed)}" if failed else "every step passed or was skipped with a reason")
          + ("" if c.record["complete"] else f"; INCOMPLETE: {c.record['interrupted']}"), file=sys.stderr)
    return 1 if failed or not c.record["complete"] else 0


if __name__ == "__main__":
    sys.exit(main())
