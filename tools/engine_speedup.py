"""What `--engine` gives a user: the command line itself, on a file, engine against engine.

Runs `annotated-transformer translate --input FILE --output OUT --engine E [--compute-type C]` for each engine and
compute type in turn (one round = each once; the first round is a warm-up: it fills the export cache), on one thread
(OMP_NUM_THREADS=1, which every engine's thread count follows) and on the whole machine (no setting), and records for
each run the command's own last line (sentences/s of the translating, the engine and its layout) and its wall time
(start-up, loading and translating). The export cache is a fresh folder of this run (XDG_CACHE_HOME).

    python tools/engine_speedup.py --out nbs/results/engine_speedup_avx512.json            # test_2016_flickr, 1,000
    python tools/engine_speedup.py --rounds 2 -n 200 --out /tmp/quick.json

Needs the [ctranslate2] extra and Multi30k under the data root (`ANNOTATED_TRANSFORMER_DATA`)."""
import argparse, gzip, json, os, re, shlex, statistics, subprocess, sys, tempfile, time
from pathlib import Path

from annotated_transformer.benchmarking import machine_record
from annotated_transformer.data import DATA_ENV

EXE = str(Path(sys.executable).parent / "annotated-transformer")
CONFIGS = [("torch", "float32"), ("ctranslate2", "float32"), ("ctranslate2", "int8")]
LAST = re.compile(r"translate: ([\d,]+) sentences? in ([\d.]+) s \(([\d,.]+) sentences/s\), engine (.+)$")


def run_once(src: Path, out: Path, engine: str, compute: str, env: dict) -> dict:
    "One command: its sentences/s (translating only), wall seconds (everything), and the engine it named."
    argv = [EXE, "translate", "--input", str(src), "--output", str(out), "--engine", engine, "--compute-type", compute]
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if r.returncode: raise SystemExit(f"{shlex.join(argv)} failed:\n{r.stderr[-2000:]}")
    m = LAST.search(r.stderr.replace("\r", "\n").strip().splitlines()[-1])
    return {"sentences_per_s": float(m[3].replace(",", "")), "wall_s": round(wall, 2), "engine_line": m[4],
            "exported": "exporting the model" in r.stderr}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=1000, help="the first N sentences of test_2016_flickr (default 1000)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds after the warm-up round (default 3)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    root = os.environ.get(DATA_ENV) or sys.exit(f"set ${DATA_ENV} to the data root (a folder holding multi30k/)")
    with gzip.open(Path(root) / "multi30k" / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        lines = [l for _, l in zip(range(a.n), f)]
    command = shlex.join(["python", "tools/engine_speedup.py", *(argv if argv is not None else sys.argv[1:])])
    res = {"what": "translate --input FILE on each engine and compute type, in turn; sentences/s as the command "
                   "prints it (translating only), wall seconds of the whole command",
           **machine_record(command), "sentences": len(lines), "rounds": a.rounds, "layouts": {}}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "test.de"
        src.write_text("".join(lines), encoding="utf-8")
        for layout, threads in (("1 thread", {"OMP_NUM_THREADS": "1"}), ("whole machine", {})):
            env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
            env.update(threads, XDG_CACHE_HOME=str(Path(tmp) / "cache"))
            runs = {f"{e} {c}": [] for e, c in CONFIGS}
            for r in range(a.rounds + 1):
                for e, c in CONFIGS:
                    got = run_once(src, Path(tmp) / "out.txt", e, c, env)
                    print(f"{layout}, round {r}: {e} {c}: {got}", flush=True)
                    if r: runs[f"{e} {c}"].append(got)
            base = statistics.median(x["sentences_per_s"] for x in runs["torch float32"])
            res["layouts"][layout] = [
                {"flags": f"--engine {k.split()[0]} --compute-type {k.split()[1]}",
                 "engine_line": v[-1]["engine_line"],
                 "sentences_per_s": statistics.median(x["sentences_per_s"] for x in v),
                 "every_sentences_per_s": [x["sentences_per_s"] for x in v],
                 "wall_s": statistics.median(x["wall_s"] for x in v),
                 "vs_torch_float32": round(statistics.median(x["sentences_per_s"] for x in v) / base, 2)}
                for k, v in runs.items()]
    Path(a.out).write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for layout, rows in res["layouts"].items():
        for r in rows: print(f"{layout}: {r['flags']}: {r['sentences_per_s']:.1f} sentences/s, "
                             f"{r['vs_torch_float32']:.2f}× torch float32, whole command {r['wall_s']:.1f} s")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
