"""Memory of the data path of `annotated-transformer train --train PREFIX` per million sentence pairs (issue 16).

Writes a synthetic corpus of N pairs (Multi30k's training sentences repeated, or the shipped sample's, so the lengths
are real), then runs the path a run takes — `read_corpus` (one list of (src, tgt) strings), joint BPE (8,000 ids),
`encode_corpus` (flat int32 buffers) — and records the resident memory (VmRSS) after each stage and the peak (VmHWM),
in MiB and MiB per million pairs. With --old, the same for the path Multi30k used before (whole-file reads, a list of
int64 tensors per pair), in a separate process, for comparison.

    python tools/bench_data_memory.py --pairs 1000000 --out bench_data_memory.json

A benchmark, not a test: it takes minutes and needs a few GB of memory; it is not run by the test suite."""
from __future__ import annotations
import argparse, gc, json, os, platform, shlex, subprocess, sys, tempfile, time
from pathlib import Path


def mem() -> dict:
    "VmRSS and VmHWM (peak) of this process, MiB."
    out = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"): out[k] = int(v.split()[0]) / 1024
    return out


def write_corpus(folder: Path, n: int) -> Path:
    "N pairs in folder/train.de, folder/train.en: real sentences repeated (Multi30k's if a data root is set, else the sample's)."
    from annotated_transformer.data import find_multi30k, load_split, SAMPLE_DIR
    root = find_multi30k(quiet=True)
    base = load_split("train", root or SAMPLE_DIR)
    with open(folder / "train.de", "w", encoding="utf-8") as de, open(folder / "train.en", "w", encoding="utf-8") as en:
        for i in range(n):
            s, t = base[i % len(base)]
            de.write(s + "\n"); en.write(t + "\n")
    return folder / "train"


def stage_new(prefix: Path, n: int) -> dict:
    from annotated_transformer.data import read_corpus, build_codec, encode_corpus
    gc.collect(); r = {"imports": mem()}; t = time.perf_counter()
    pairs = read_corpus(prefix, "de", "en"); assert len(pairs) == n
    r["read_corpus"] = {**mem(), "s": round(time.perf_counter() - t, 1)}; t = time.perf_counter()
    codec = build_codec(pairs, bpe=True, bpe_vocab_size=8000)
    r["bpe_vocabulary"] = {**mem(), "s": round(time.perf_counter() - t, 1)}; t = time.perf_counter()
    data = encode_corpus(codec, pairs, 1024, (f"{prefix}.de", f"{prefix}.en"))
    r["encode_corpus"] = {**mem(), "s": round(time.perf_counter() - t, 1), "packed_MiB": data.nbytes / 2**20,
                          "tokens": int(len(data.src) + len(data.tgt))}
    del pairs; gc.collect()
    r["strings_dropped"] = mem()                            # what training holds from here on: the packed ids
    return r


def stage_old(prefix: Path, n: int) -> dict:
    from annotated_transformer.data import read_parallel, build_codec, encode_pairs
    gc.collect(); r = {"imports": mem()}
    pairs = read_parallel(f"{prefix}.de", f"{prefix}.en"); r["read_parallel"] = mem()
    codec = build_codec(pairs, bpe=True, bpe_vocab_size=8000); r["bpe_vocabulary"] = mem()
    data = encode_pairs(codec, pairs, 1024); r["encode_pairs"] = mem()
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=1_000_000)
    p.add_argument("--old", action="store_true", help="also measure the old path (a separate process)")
    p.add_argument("--out", default=None, help="write the JSON here (default: stdout only)")
    p.add_argument("--stage", choices=["new", "old"], default=None, help=argparse.SUPPRESS)   # the child process
    p.add_argument("--prefix", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.stage:                                             # child: one path, in a fresh process
        print(json.dumps((stage_new if a.stage == "new" else stage_old)(Path(a.prefix), a.pairs))); return
    with tempfile.TemporaryDirectory() as d:
        prefix = write_corpus(Path(d), a.pairs)
        runs = {}
        for stage in (["new", "old"] if a.old else ["new"]):
            cmd = [sys.executable, __file__, "--stage", stage, "--prefix", str(prefix), "--pairs", str(a.pairs)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[stage] = json.loads(out.strip().splitlines()[-1])
    per_m = lambda mib: round(mib * 1e6 / a.pairs)
    new = runs["new"]; base = new["imports"]["VmRSS"]
    from annotated_transformer.benchmarking import machine_record   # after the children: not measured
    res = {**machine_record(shlex.join([Path(sys.executable).name, *sys.argv])), "pairs": a.pairs,
           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
           "stages_MiB": runs,
           "per_million_pairs_MiB": {
               "strings (read_corpus)": per_m(new["read_corpus"]["VmRSS"] - base),
               "peak (while encoding)": per_m(new["encode_corpus"]["VmHWM"] - base),
               "held while training (packed ids)": per_m(new["strings_dropped"]["VmRSS"] - base),
               "packed ids alone": per_m(new["encode_corpus"]["packed_MiB"])}}
    if a.old:
        old = runs["old"]; ob = old["imports"]["VmRSS"]
        res["per_million_pairs_MiB"]["old path: peak"] = per_m(old["encode_pairs"]["VmHWM"] - ob)
        res["per_million_pairs_MiB"]["old path: held while training"] = per_m(old["encode_pairs"]["VmRSS"] - ob)
    text = json.dumps(res, indent=1)
    if a.out: Path(a.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
