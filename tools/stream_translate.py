"""Big files through `translate`: what a stop keeps, what memory holds, and what windows cost in speed.

`translate` reads its input `--window` lines at a time, sorts within each window and writes each window when it is
done (chapter 36's `translate_lines`). This measures the command line itself, on files made by repeating Multi30k's
test sets, and writes one JSON with three parts:

- kept: a 5,000-line file, SIGINT after 45 s (and 20 s) from the start of the command, on the default engine (with
  --busy N, beside N CPU-bound processes, as on a machine with other jobs running); the
  sentences decoded by then (the progress bar's last count), the lines kept in OUTPUT.partial, their share, and
  whether they equal the first lines of an uninterrupted run (a run that finished first keeps everything);
- memory: the peak RSS (the process's ru_maxrss) of translating a 1,000-line and a 200,000-line file, both a line of
  each test set in turn (the same kinds of sentence);
- speed: sentences/s (the command's own last line: the translating alone) with the default window against one window
  holding the whole file (the full sort every earlier version did), alternately, per engine and file size.

    python tools/stream_translate.py --out nbs/results/stream_translate.json
    python tools/stream_translate.py --parts speed --speed-lines 1000 --rounds 1 --out /tmp/quick.json

Needs Multi30k under the data root (`ANNOTATED_TRANSFORMER_DATA`), and the [ctranslate2] extra for its rows."""
import argparse, gzip, itertools, json, os, re, shlex, signal, statistics, subprocess, sys, tempfile, time
from pathlib import Path

from annotated_transformer.benchmarking import machine_record
from annotated_transformer.data import DATA_ENV, find_multi30k

EXE = str(Path(sys.executable).parent / "annotated-transformer")
LAST = re.compile(r"translate: ([\d,]+) sentences? in ([\d.]+) s \(([\d,.]+) sentences/s\), engine (.+)$")
BAR = re.compile(r"(\d+)/(\d+) \[")
WHOLE = 10**9                        # a window larger than any file: the whole file sorted at once


def test_sets() -> list[list[str]]:
    "The German side of each Multi30k test set (about 4,500 lines in all), the material the files repeat."
    root = find_multi30k(quiet=True)
    names = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
    return [gzip.open(root / f"{n}.de.gz", "rt", encoding="utf-8").read().splitlines() for n in names
            if (root / f"{n}.de.gz").is_file()]


def make_file(folder: Path, n: int, sets: list[list[str]], mixed: bool=False) -> Path:
    "A file of `n` lines: the test sets one after the other (test_2016_flickr first), repeated; `mixed`: a line of"
    " each set in turn, so that a short file holds the same kinds of sentence as a long one."
    lines = ([x for group in itertools.zip_longest(*sets) for x in group if x is not None] if mixed
             else [x for s in sets for x in s])
    p = folder / f"in{n}{'-mixed' if mixed else ''}.de"
    p.write_text("".join(lines[i % len(lines)] + "\n" for i in range(n)), encoding="utf-8")
    return p


def translate(src: Path, out: Path, engine: str, window: int|None, env: dict, extra=()) -> dict:
    "One command to its end: sentences/s (the translating), wall seconds, and its peak RSS (MiB)."
    argv = [EXE, "translate", "--input", str(src), "--output", str(out), "--engine", engine,
            *(["--window", str(window)] if window else []), *extra]   # None: the engine's default
    t, p = time.perf_counter(), subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                                 env=env)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode: raise SystemExit(f"{shlex.join(argv)} failed:\n{err[-2000:]}")
    m = LAST.search(err.replace("\r", "\n").strip().splitlines()[-1])
    return {"sentences_per_s": float(m[3].replace(",", "")), "wall_s": round(time.perf_counter() - t, 2),
            "window": int(re.search(r"windows of ([\d,]+) lines", m[4])[1].replace(",", "")),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "engine_line": m[4], "argv": argv[1:]}


def kept_part(folder: Path, lines: list[list[str]], env: dict, stops: list[float], n: int) -> list[dict]:
    "SIGINT after each of `stops` seconds: decoded (the bar's count), kept (OUTPUT.partial), the same as a whole run?"
    src, whole = make_file(folder, n, lines), folder / "whole.en"
    translate(src, whole, "torch", None, env)
    first = whole.read_text(encoding="utf-8").splitlines()
    rows = []
    for after_s in stops:
        out = folder / f"stopped{after_s:g}.en"
        argv = [EXE, "translate", "--input", str(src), "--output", str(out)]
        with open(folder / "stopped.err", "wb") as log:
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=env)
            try: p.wait(timeout=after_s)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGINT)
                p.wait(timeout=300)
        err = (folder / "stopped.err").read_bytes().decode("utf-8", "replace")
        bars = BAR.findall(err)
        decoded = n if p.returncode == 0 else int(bars[-1][0]) if bars else 0
        kept = (out if p.returncode == 0 else Path(f"{out}.partial")).read_text(encoding="utf-8").splitlines()
        rows.append({"command": shlex.join(argv[1:]) + f"  (SIGINT after {after_s:g} s)", "lines": n,
                     "after_s": after_s, "exit_status": p.returncode, "finished": p.returncode == 0,
                     "decoded": decoded, "kept": len(kept), "kept_share": round(len(kept) / max(decoded, 1), 3),
                     "same_as_uninterrupted": kept == first[:len(kept)],
                     "message": err.strip().replace("\r", "\n").splitlines()[-1]})
        print(f"kept: {rows[-1]}", file=sys.stderr)
    return rows


def memory_part(folder: Path, lines: list[list[str]], env: dict, sizes: list[int], engine: str, extra) -> dict:
    "Peak RSS of each file size, one command each, the smallest first."
    rows = []
    for n in sizes:
        r = translate(make_file(folder, n, lines, mixed=True), folder / f"mem{n}.en", engine, None, env, extra)
        rows.append({"lines": n, **r})
        print(f"memory: {n:,} lines: {r['peak_rss_mib']} MiB, {r['sentences_per_s']} sentences/s", file=sys.stderr)
    return {"engine": engine, "extra_flags": list(extra), "window": rows[0]["window"], "rows": rows,
            "ratio": round(rows[-1]["peak_rss_mib"] / rows[0]["peak_rss_mib"], 3)}


def speed_part(folder: Path, lines: list[list[str]], env: dict, engines: list[str], sizes: list[int], rounds: int,
               rounds_long: int) -> list:  # rounds_long: for files over 1,000 lines
    "Per engine and size: the default window against the whole file, alternately (`rounds` each, after a warm-up)."
    out = []
    for engine in engines:
        for n in sizes:
            src, times = make_file(folder, n, lines), {"window": [], "whole": []}
            warm = make_file(folder, 100, lines)                                 # fills the export cache
            window = translate(warm, folder / "warm.en", engine, None, env)["window"]
            window = translate(src, folder / "warm.en", engine, None, env)["window"] if n <= 1000 else window
            for r in range(rounds if n <= 1000 else rounds_long):
                for name in (("window", "whole") if r % 2 == 0 else ("whole", "window")):
                    w = None if name == "window" else WHOLE
                    times[name].append(translate(src, folder / f"{name}.en", engine, w, env)["sentences_per_s"])
            med = {k: statistics.median(v) for k, v in times.items()}
            out.append({"engine": engine, "lines": n, "window": window, "sentences_per_s": times,
                        "median": med, "ratio": round(med["window"] / med["whole"], 3)})
            print(f"speed: {engine} {n:,} lines: {med} -> {out[-1]['ratio']}", file=sys.stderr)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", default="kept,memory,speed", help="comma-separated: kept, memory, speed")
    p.add_argument("--engines", default="torch,ctranslate2")
    p.add_argument("--speed-lines", default="1000,20000", help="file sizes of the speed part")
    p.add_argument("--rounds", type=int, default=3, help="timed runs of each window per engine and size")
    p.add_argument("--rounds-long", type=int, default=2, help="the same, for files over 1,000 lines")
    p.add_argument("--memory-lines", default="1000,200000")
    p.add_argument("--memory-engine", default="ctranslate2")
    p.add_argument("--memory-flags", default="--compute-type int8 --beam-size 1",
                   help="flags of the memory runs (a 200,000-line file in minutes, not hours)")
    p.add_argument("--kept-after", default="45,20", help="seconds after which SIGINT stops the 5,000-line file")
    p.add_argument("--busy", type=int, default=0,
                   help="CPU-bound processes running beside the kept part (another job on the machine)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if not os.environ.get(DATA_ENV) and find_multi30k(quiet=True) is None: raise SystemExit("no Multi30k found")
    parts, lines = a.parts.split(","), test_sets()
    res = machine_record("python tools/stream_translate.py " + shlex.join(argv or sys.argv[1:]))
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(d) / "cache"), "PYTHONUNBUFFERED": "1"}
        if "kept" in parts:
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
            try: res["kept"] = kept_part(Path(d), lines, env, [float(x) for x in a.kept_after.split(",")], 5000)
            finally:
                for b in busy: b.kill()
            res["busy_processes"] = a.busy
        if "memory" in parts:
            res["memory"] = memory_part(Path(d), lines, env, [int(n) for n in a.memory_lines.split(",")],
                                        a.memory_engine, a.memory_flags.split())
        if "speed" in parts:
            res["speed"] = speed_part(Path(d), lines, env, a.engines.split(","),
                                      [int(n) for n in a.speed_lines.split(",")], a.rounds, a.rounds_long)
    Path(a.out).write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in res.items() if k in ("kept", "memory")}, indent=1)[:3000])


if __name__ == "__main__":
    main()
