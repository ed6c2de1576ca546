"""Run the copy task's default recipe (`annotated-transformer train --task copy`) for several seeds and check the claim:
every seed copies all 1,000 held-out sequences, with a margin of at least --margin nats. Exits 1 if any seed falls short.

    python tools/copy_seeds.py --seeds 0                       # one seed (e.g. under ../shared/tools/cpu-variants)
    python tools/copy_seeds.py --seeds 5-14 --output nbs/results/copy_seeds.json
"""
import argparse, json, os, subprocess, sys, time
from pathlib import Path

def seeds(text: str) -> list[int]:
    "'0' -> [0]; '5-14' -> [5, ..., 14]; '0,3' -> [0, 3]."
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=seeds, default=seeds("0-4"), help="e.g. 0, 5-14 or 0,3 (default 0-4)")
    p.add_argument("--margin", type=float, default=3.0, help="smallest margin in nats that counts as room to spare")
    p.add_argument("--output", help="write the results as JSON (with the command and the CPU) to this file")
    args = p.parse_args()
    exe = str(Path(sys.executable).parent / "annotated-transformer")
    rows, ok = [], True
    for s in args.seeds:
        cmd = [exe, "train", "--task", "copy", "--seed", str(s), "--json"]
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-2000:], file=sys.stderr); return 1
        res = json.loads(r.stdout.strip().splitlines()[-1])
        res["wall_s"], res["threads"] = round(time.perf_counter() - t, 1), os.environ.get("OMP_NUM_THREADS", "default")
        good = res["exact_match"] == 1.0 and res["min_margin"] >= args.margin
        ok &= good
        rows.append(res)
        print(f"seed {s:3d}: {res['correct']}/{res['total']} exact, smallest margin {res['min_margin']:.2f} nats, "
              f"{res['wall_s']:.0f} s, {res['cpu_capability']}, threads {res['threads']}{'' if good else '  <-- FAILS'}", flush=True)
    if args.output:
        from annotated_transformer.benchmarking import machine_record
        Path(args.output).write_text(json.dumps({
            **machine_record(" ".join(["python", "tools/copy_seeds.py"] + sys.argv[1:])), "margin_required": args.margin,
            "worst_exact_match": min(r["exact_match"] for r in rows), "worst_margin": min(r["min_margin"] for r in rows),
            "runs": rows}, indent=1) + "\n")
    print(f"worst: exact match {min(r['exact_match'] for r in rows):.1%}, margin {min(r['min_margin'] for r in rows):.2f} nats")
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
