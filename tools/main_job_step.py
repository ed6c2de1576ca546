"""The main job's training step on its own batches: two levers, each on and off, timed interleaved (chapter 24).

`annotated-transformer train` (Multi30k de→en, the CPU's recipe, its precision) builds its model, batches, optimizer
and schedule as a run does (`prepare_run`, `training_parts`); this script times chapter 11's `TrainStep` on the run's
first batches with:
  - the fast twins' position-wise layers on real positions only (`ModelLevers.real_rows`) or on every position;
  - §5.4's label-smoothed loss as chapter 10 writes it (`LabelSmoothingLoss`) or in one pass (`FusedLabelSmoothingLoss`).
Each variant has its own model and optimizer, seeded alike; every round times each variant on the same batches, in
turn. The result, seconds per update for each variant and round, goes to a JSON of nbs/results/.

Usage:
  python tools/main_job_step.py nbs/results/main_job_step_avx512.json [--rounds 4] [--steps 10] [--threads 2]
"""
import argparse, json, os, shlex, statistics, sys, tempfile, time
from pathlib import Path
import torch

VARIANTS = {   # name -> (real_rows, fused loss)
    "real positions only, loss as chapter 10 writes it": (True, False),
    "every position": (False, False),
    "loss in one pass": (True, True),
    "every position, loss in one pass": (False, True),
}

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("output")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=10, help="timed updates per variant and round")
    p.add_argument("--warmup", type=int, default=5, help="untimed updates per variant first")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default torch's)")
    a = p.parse_args(argv)
    if a.threads: torch.set_num_threads(a.threads)
    from annotated_transformer.benchmarking import machine_record
    from annotated_transformer.multi30k import RunOptions, prepare_run, training_parts, run_precision
    from annotated_transformer.runtime import distributed_session, seed_everything
    from annotated_transformer.fast_model import make_fast, ModelLevers
    from annotated_transformer.regularization import LabelSmoothingLoss, FusedLabelSmoothingLoss
    from annotated_transformer.training import TrainStep, StepOptions
    command = shlex.join(["python", "tools/main_job_step.py", *(sys.argv[1:] if argv is None else argv)])
    rec = machine_record(command)
    n = a.warmup + a.rounds * a.steps
    with tempfile.TemporaryDirectory() as d, distributed_session("cpu") as ctx:
        run = prepare_run(ctx, RunOptions(checkpoint_dir=Path(d) / "run", device="cpu"), {}, lambda m: None)
        precision = run_precision(run.recipe, None, ctx.device)
        steps, batches, pairs = {}, None, run.train_pairs
        for name, (rows, fused) in VARIANTS.items():
            seed_everything(run.seed)
            run.train_pairs = pairs                        # training_parts lets them go once encoded
            twins = lambda m: make_fast(m, ModelLevers(real_rows=rows))
            model, loader, _, opt, sched, _ = training_parts(run, ctx.device, transform=twins)
            if batches is None:
                it = iter(loader)
                batches = [next(it) for _ in range(n)]
            c = model.config
            loss = (FusedLabelSmoothingLoss if fused else LabelSmoothingLoss)(
                c.tgt_vocab_size, run.recipe.label_smoothing, c.pad_idx)
            steps[name] = TrainStep(model, opt, sched, loss, StepOptions(precision=precision, device="cpu"))
            for b in batches[:a.warmup]: steps[name]([b])
        seconds = {name: [] for name in VARIANTS}
        for r in range(a.rounds):
            part = batches[a.warmup + r * a.steps: a.warmup + (r + 1) * a.steps]
            for name, step in steps.items():
                t = time.perf_counter()
                for b in part: step([b])
                seconds[name].append(round((time.perf_counter() - t) / len(part), 4))
                print(f"round {r + 1}: {name}: {seconds[name][-1]:.3f} s/update", flush=True)
    tokens = [int(b.n_tokens) for b in batches[a.warmup:]]
    padding = {side: round(sum(int((getattr(b, k) == b.pad_idx).sum()) for b in batches) /
                           sum(getattr(b, k).numel() for b in batches), 4)
               for side, k in (("source", "src"), ("target", "tgt_out"))}
    median = {k: statistics.median(v) for k, v in seconds.items()}
    base = median["real positions only, loss as chapter 10 writes it"]
    out = {**rec, "precision": precision, "recipe": run.recipe_name, "threads": torch.get_num_threads(),
           "rounds": a.rounds, "steps_per_round": a.steps, "target_tokens_per_update": statistics.mean(tokens),
           "padding_share": padding, "seconds_per_update": seconds,
           "median_s": median, "speedup": {k: round(base / v, 3) for k, v in median.items()}}
    out["hardware"]["torch_threads"] = torch.get_num_threads()
    Path(a.output).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(out["speedup"]), "->", a.output)

if __name__ == "__main__": main()
