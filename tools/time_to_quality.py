"""Time to quality: validation BLEU against wall-clock minutes for a `train` run (chapter 16's curves).

  run    start `annotated-transformer train ARGS` (pinned to --cpu, --threads torch threads), keep every checkpoint
         it writes (a hard link, before the run prunes it) with the second it appeared, and stop it with SIGTERM
         after --minutes unless its training has ended (its averaged.pt written: the final scoring runs on; a run
         that ends by itself has its final scores in its --json output);
  score  score the checkpoint each --every minutes held: val, beam 4, α 0.6 (chapter 14's search), sacreBLEU,
         through `annotated-transformer evaluate`, pinned and threaded as asked, and the last checkpoint;
  save   write the curve to a JSON of nbs/results/ (machine, CPU capability, date, the commands);
  sets   score the model each named run kept (the one its end chose: averaged or last) and a shipped model (today's,
         or the one a git commit held: --at REV) on val and every Multi30k test set, the same search, and pair each
         run with the shipped model set by set (chapter 15's paired bootstrap), into one JSON of nbs/results/
         (chapter 16's table).

A run's folder (--work, default /tmp/ttq/NAME) holds the run's checkpoints, kept/ (every checkpoint, linked),
times.json (checkpoint -> seconds since the start), train.log, train.json, scores.json and score_args.json (how
they were scored). Scoring a run that is still training is allowed: its checkpoints are final once they appear.

Usage:
  python tools/time_to_quality.py run NAME --minutes 30 [--cpu 0] [--threads 1] -- --precision bf16 --seed 0
  python tools/time_to_quality.py run NAME --minutes 40 --as-typed -- --seed 0   (the README's command, empty folder)
  python tools/time_to_quality.py score NAME [--every 3] [--cpu 0] [--threads 1]
  python tools/time_to_quality.py save NAME nbs/results/ttq_NAME.json --what "..." --label "..."
  python tools/time_to_quality.py sets ne ne1 --model en-de [--at REV] --out nbs/results/every_set_en-de.json """
import argparse, json, os, re, shlex, signal, subprocess, sys, time
from pathlib import Path

WORK = Path(os.environ.get("TTQ_WORK", "/tmp/ttq"))
ROOT = Path(__file__).resolve().parent.parent                    # the repository
# the instruction-set caps of ATen, oneDNN and MKL: a run made under them records them
CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
caps_env = lambda: {k: os.environ[k] for k in CAPS if k in os.environ}   # the instruction-set caps in force


def pin(args: dict) -> str:
    "The `--cpu`/`--threads` flags a run or a scoring was started with (its run.json or score_args.json)."
    return (f" --cpu {args['cpu']}" if args.get("cpu") is not None else "") + (
        f" --threads {args['threads']}" if args.get("threads") else "")


def caps_prefix(args: dict) -> str:
    "The caps a run or a scoring ran under, as the shell prefix that sets them again ('' for none)."
    return "".join(f"{k}={v} " for k, v in (args.get("env") or {}).items())


EXE = Path(sys.executable).parent / "annotated-transformer"


def thread_env(threads: int|None) -> dict:
    "OMP/MKL threads for a child (None: torch's default)."
    return {} if threads is None else {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}

def pinned(cpu: int|None):
    "A child's preexec: SIGINT at its default, pinned to one CPU if asked."
    def setup():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if cpu is not None: os.sched_setaffinity(0, {cpu})
    return setup

def machine(command: str, threads: int|None) -> dict:
    "The command, date and machine (CPU, vendor, capability, bf16, the run's torch threads): `machine_record`'s."
    from annotated_transformer.benchmarking import machine_record
    rec = machine_record(command)
    if threads is not None: rec["hardware"]["torch_threads"] = threads
    return rec

def atomic_json(path: Path, obj):
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def cmd_run(a):
    d = Path(a.work or WORK / a.name)
    d.mkdir(parents=True, exist_ok=True)
    ck, kept = d / "ckpt", d / "kept"
    kept.mkdir(exist_ok=True)
    argv = [str(EXE), "train", "--device", "cpu", "--checkpoint-dir", str(ck), "--json", *a.train_args]
    cwd = None
    if a.as_typed:          # the README's command, in an empty folder: its own checkpoint folder, its own output
        cwd = d / "cwd"
        if cwd.exists() and any(cwd.iterdir()): raise SystemExit(f"{cwd} is not empty")
        cwd.mkdir(exist_ok=True)
        argv = ["annotated-transformer", "train", *a.train_args]
    found = lambda pattern: (sorted(ck.glob(pattern)) if cwd is None
                             else sorted(cwd.glob(f"checkpoints/*/{pattern}")))
    env = {**os.environ, **thread_env(a.threads), "PYTHONUNBUFFERED": "1"}
    command = " ".join(f"{k}={v}" for k, v in thread_env(a.threads).items()) + " " + shlex.join(argv)
    if a.cpu is not None: command = f"taskset -c {a.cpu} {command}"
    print("+", command, flush=True)
    times, t0 = {}, time.time()
    info = {"name": a.name, **machine(command.strip(), a.threads), "minutes": a.minutes, "threads": a.threads,
            "cpu": a.cpu, "as_typed": a.as_typed, "env": caps_env()}
    if cwd is not None: info["cwd"] = "an empty folder"
    env["PATH"] = f"{EXE.parent}{os.pathsep}{env.get('PATH', '')}"
    with open(d / "train.json", "w") as out, open(d / "train.log", "w") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, preexec_fn=pinned(a.cpu), cwd=cwd)
        stop = None
        while p.poll() is None:
            for f in found("step_*.pt") + found("averaged.pt"):
                if f.name not in times:
                    times[f.name] = round(time.time() - t0, 1)
                    try: os.link(f, kept / f.name)
                    except FileExistsError: pass
                    except FileNotFoundError: times.pop(f.name)        # pruned before we saw it settle
                    atomic_json(d / "times.json", times)
            # the limit stops training; once averaged.pt is written, training has ended: its final scoring runs on
            if stop is None and time.time() - t0 > a.minutes * 60 and not found("averaged.pt"):
                stop = {"signal": "SIGTERM", "sent_at_s": round(time.time() - t0, 1)}
                p.send_signal(signal.SIGTERM)
            time.sleep(2)
    wall = time.time() - t0
    for f in found("step_*.pt") + found("averaged.pt"):   # the last ones, written at the end
        if f.name not in times:
            times[f.name] = round(wall, 1)
            try: os.link(f, kept / f.name)
            except FileExistsError: pass
    atomic_json(d / "times.json", times)
    info.update(rc=p.returncode, wall_s=round(wall, 1), stop=stop, ended_by_itself=stop is None)
    text = (d / "train.json").read_text()
    try: info["result"] = printed_result(text) if cwd is not None else json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError): info["result"] = None
    atomic_json(d / "run.json", info)
    print(f"{a.name}: rc {p.returncode}, {wall / 60:.1f} min, {len(times)} checkpoints kept", flush=True)


def printed_result(text: str) -> dict|None:
    "The numbers a `train` run without --json prints at its end (`_print_multi30k`'s lines); None if it stopped first."
    head = re.search(r"trained \S+: ([\d,]+) updates \((\d+) epochs?\) of the (\S+) recipe in ([\d.]+) min", text)
    if head is None: return None                            # stopped before its end: nothing printed
    pick = re.search(r"of the last checkpoint ([\d.]+): keeping the (\w+) model", text)
    avg = re.search(r"val BLEU of the average of \d+ checkpoints ([\d.]+)", text)
    rows = dict(re.findall(r"^\| (\w+) \| [\d,]+ \| ([\d.]+) \|", text, re.M))
    return {"updates": int(head[1].replace(",", "")), "epochs": int(head[2]), "recipe_name": head[3],
            "train_time_s": round(float(head[4]) * 60, 1), "selected": pick and pick[2],
            "val_bleu_averaged": avg and float(avg[1]), "val_bleu_last": pick and float(pick[1]),
            "val_bleu": float(rows["val"]) if "val" in rows else None,
            **{f"{k}_bleu": float(v) for k, v in rows.items() if k != "val"}}

def evaluate_json(model: list[str], splits: str, cpu, threads, out: Path|None=None) -> tuple[dict, list[str]]:
    "`annotated-transformer evaluate --json` of MODEL (`--checkpoint P` or `--model NAME`) on SPLITS: beam 4, α 0.6."
    argv = [str(EXE), "evaluate", *model, "--split", splits, "--beam-size", "4", "--length-penalty", "0.6",
            "--device", "cpu", *(["--output", str(out)] if out else []), "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **thread_env(threads)},
                       preexec_fn=pinned(cpu))
    if r.returncode: raise SystemExit(f"{shlex.join(argv)} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1]), argv

def evaluate(path: Path, out: Path, cpu, threads, split="val") -> dict:
    "val BLEU of one checkpoint: beam 4, α 0.6 (the book's search), through the command line."
    t = time.time()
    res, argv = evaluate_json(["--checkpoint", str(path)], split, cpu, threads, out)
    return {"bleu": round(res["bleu"], 2), "decode_s": round(time.time() - t, 1), "command": shlex.join(argv)}

def cmd_score(a):
    d = Path(a.work or WORK / a.name)
    times = json.loads((d / "times.json").read_text())
    scores_f = d / "scores.json"
    scores = json.loads(scores_f.read_text()) if scores_f.exists() else {}
    steps = sorted(((t, n) for n, t in times.items() if n.startswith("step_")), key=lambda x: x[0])
    marks, m = [], a.every
    while steps and m * 60 <= steps[-1][0] + a.every * 60:
        held = [n for t, n in steps if t <= m * 60]
        if held and held[-1] not in marks: marks.append(held[-1])
        m += a.every
    if steps and steps[-1][1] not in marks: marks.append(steps[-1][1])
    # how the scores were made, for `save`'s record (the pin of the scoring, not of the run)
    atomic_json(d / "score_args.json", {"cpu": a.cpu, "threads": a.threads, "every": a.every, "env": caps_env()})
    for n in marks:
        if n in scores: continue
        s = evaluate(d / "kept" / n, d / f"hyps.{n}.txt", a.cpu, a.threads)
        scores[n] = {"minutes": round(times[n] / 60, 2), **s}
        print(f"{a.name}: {n} at {times[n] / 60:.1f} min: val BLEU {s['bleu']} ({s['decode_s']} s)", flush=True)
        atomic_json(scores_f, scores)


def cmd_save(a):
    d = Path(a.work or WORK / a.name)
    run = json.loads((d / "run.json").read_text())
    scores = json.loads((d / "scores.json").read_text()) if (d / "scores.json").exists() else {}   # a probe: none
    pts = [{"checkpoint": n, "step": int(n[5:-3]), **{k: v for k, v in s.items() if k != "command"}}
           for n, s in sorted(scores.items(), key=lambda x: x[1]["minutes"])]
    res = run.get("result") or {}
    argv = shlex.split(run["command"])
    flag = lambda f, default: argv[argv.index(f) + 1] if f in argv else default
    src = flag("--src", "de")
    tgt = flag("--tgt", {"de": "en", "en": "de"}.get(src))
    typed = run.get("as_typed")
    given = argv[argv.index("train") + 1:] if typed else argv[argv.index("--json") + 1:]   # after the tool's "--"
    # how the scores were made (score_args.json; a run scored before it was written: the run's pin)
    sa = json.loads((d / "score_args.json").read_text()) if (d / "score_args.json").exists() else run
    every = f" --every {sa['every']:g}" if sa.get("every", 3) != 3 else ""
    how = [f"{caps_prefix(run)}python tools/time_to_quality.py run {a.name} --minutes {run['minutes']:g}"
           f"{pin(run)}{' --as-typed' if typed else ''} -- {shlex.join(given)}".rstrip(),
           f"{caps_prefix(sa)}python tools/time_to_quality.py score {a.name}{every}{pin(sa)}",
           f"python tools/time_to_quality.py save {a.name} {a.output} --what ... --label ..."]
    out = {"what": a.what, "label": a.label, "direction": f"{src}-{tgt}", "name": a.name, "how": how,
           "command": run["command"], "date": run["date"], "hardware": run["hardware"],
           "score_command": "annotated-transformer evaluate --checkpoint CKPT --split val --beam-size 4 "
                            "--length-penalty 0.6 --device cpu",
           "threads": run["hardware"]["torch_threads"], "wall_s": run["wall_s"],
           "ended_by_itself": run["ended_by_itself"], "points": pts,
           "checkpoint_s": json.loads((d / "times.json").read_text()),     # each checkpoint's second since the start
           "env": run.get("env", {}),
           "final": {k: res.get(k) for k in ("updates", "epochs", "train_time_s", "total_time_s", "precision",
                                              "selected", "val_bleu", "val_bleu_averaged", "val_bleu_last",
                                              "test_2016_flickr_bleu", "recipe", "recipe_name") if k in res} or None}
    if typed: out["as_typed"] = "annotated-transformer train as the README types it, in an empty folder"
    atomic_json(Path(a.output), out)
    print(f"wrote {a.output}: {len(pts)} points")


def chosen_checkpoint(d: Path) -> Path:
    "The model a finished run kept (its run.json's `selected`: the averaged one or the last checkpoint)."
    res = json.loads((d / "run.json").read_text()).get("result") or {}
    if res.get("selected") not in ("averaged", "last"): raise SystemExit(f"{d}: the run did not end by itself")
    return d / "kept" / ("averaged.pt" if res["selected"] == "averaged" else
                         sorted((d / "kept").glob("step_*.pt"))[-1].name)

def model_at(name: str, rev: str, into: Path) -> tuple[Path, dict]:
    "The shipped model NAME as git commit REV held it: its folder, extracted under INTO, and its nbs/models/NAME.json."
    import io, tarfile
    git = lambda *args: subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(git("archive", rev, f"annotated_transformer/models/{name}"))) as tar:
        tar.extractall(into, filter="data")
    return into / "annotated_transformer" / "models" / name, json.loads(git("show", f"{rev}:nbs/models/{name}.json"))


def cmd_sets(a):
    """Each run's kept model and a shipped --model (as commit --at held it, if given), on val and every test set,
    each run paired with the shipped model by bootstrap resampling (chapter 15): one JSON (chapter 16's table)."""
    from annotated_transformer.data import TEST_SPLITS, load_split
    from annotated_transformer.evaluation import paired_bootstrap
    sets = ("val", *TEST_SPLITS)
    work = WORK / "sets" / Path(a.out).stem                  # hypotheses (and an earlier model's folder)
    def scored(key: str, model: list[str]) -> tuple[dict, dict, dict]:  # BLEU per set, evaluate's answer, hypotheses
        res, _ = evaluate_json(model, ",".join(sets), a.cpu, a.threads, work / f"{key}.txt")
        bleu = {r["set"]: round(r["bleu"], 2) for r in res["sets"]}
        print(key, bleu, flush=True)
        hyps = {s: (work / f"{key}.{s}.txt").read_text(encoding="utf-8").split("\n")[:-1] for s in sets}
        return bleu, res, hyps
    if a.at:
        folder, card = model_at(a.model, a.at, work / "model")
        base_key, model = f"{a.model} at {a.at}", ["--model", str(folder)]
    else:
        card = json.loads((ROOT / "nbs" / "models" / f"{a.model}.json").read_text())   # how it was trained
        base_key, model = f"shipped {a.model}", ["--model", a.model]
    bleu, res, base = scored("baseline", model)
    refs = {s: [t for _, t in load_split(s, src=card["src"], tgt=card["tgt"])] for s in sets}
    rows = {}
    for n in a.names:                         # the run's record, nbs/results/ttq_NAME.json, has its curve
        ck = chosen_checkpoint(WORK / n)
        b, _, hyps = scored(n, ["--checkpoint", str(ck)])
        samples = {"n_samples": a.samples} if a.samples else {}      # else paired_bootstrap's own
        paired = {s: paired_bootstrap(base[s], hyps[s], refs[s], **samples).to_dict() for s in sets}
        rows[n] = {"model": ck.name, "result": f"nbs/results/ttq_{n}.json", "bleu": b, "paired": paired}
    rows[base_key] = {"model": a.model, "at": a.at, "weights_sha256": res.get("weights_sha256"),
                      "train": card.get("train"), "train_command": card.get("train_command"), "bleu": bleu}
    argv = ["python", "tools/time_to_quality.py", "sets", *a.names, "--model", a.model,
            *(["--at", a.at] if a.at else []), *(["--samples", str(a.samples)] if a.samples else []),
            "--out", a.out]
    cmd = caps_prefix({"env": caps_env()}) + shlex.join(argv) + pin(vars(a))
    atomic_json(Path(a.out), {**machine(cmd, a.threads), "sets": list(sets), "search": "beam 4, α 0.6",
                              "baseline": base_key,
                              "paired_bootstrap": {k: paired["val"][k] for k in ("n_samples", "seed")},
                              "runs": rows})
    print(f"wrote {a.out}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("name")
    r.add_argument("--minutes", type=float, required=True)
    r.add_argument("--as-typed", action="store_true",
                   help="run `annotated-transformer train ARGS` as the README types it, in an empty folder")
    s = sub.add_parser("score")
    s.add_argument("name")
    s.add_argument("--every", type=float, default=3, help="minutes between scored checkpoints (default 3)")
    v = sub.add_parser("save")
    v.add_argument("name")
    v.add_argument("output")
    v.add_argument("--what", required=True, help="what the run is, a sentence")
    v.add_argument("--label", required=True, help="its name on the plot")
    t = sub.add_parser("sets")
    t.add_argument("names", nargs="+", help="runs (folders under the work root) that ended by themselves")
    t.add_argument("--model", required=True, help="the shipped model to score beside them (de-en, en-de)")
    t.add_argument("--at", default=None, help="a git commit: the --model that shipped there (default: today's)")
    t.add_argument("--samples", type=int, default=None,
                   help="bootstrap resamples per set (default: paired_bootstrap's, 1000)")
    t.add_argument("--out", required=True, help="the JSON to write")
    for x in (r, s, v): x.add_argument("--work", default=None, help=f"the run's folder (default {WORK}/NAME)")
    for x in (r, s, t):
        x.add_argument("--cpu", type=int, default=None, help="pin to this CPU")
        x.add_argument("--threads", type=int, default=None, help="torch threads (default torch's)")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)     # after "--": the arguments of `train`
    a = p.parse_args(argv[:cut])
    a.train_args = argv[cut + 1:]
    {"run": cmd_run, "score": cmd_score, "save": cmd_save, "sets": cmd_sets}[a.cmd](a)

if __name__ == "__main__": main()
