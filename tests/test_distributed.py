"Data-parallel training with torchrun (2 CPU processes, gloo) equals one process over the same global batch; bf16 on CPU."
import json, math, os, subprocess, sys, textwrap
from pathlib import Path
import torch

BIN = Path(sys.executable).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
STEPS = 4

WORKER = textwrap.dedent("""
    import os, sys, torch
    from annotated_transformer.training import FitOptions, fit
    from annotated_transformer.runtime import distributed_session
    from annotated_transformer.distributed import check_replicas_in_sync
    from annotated_transformer.model import create_transformer
    from annotated_transformer.batching import token_batch_loader
    from annotated_transformer.copy_task import copy_pairs, COPY_VOCAB_SIZE as V
    out, steps = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    with distributed_session("cpu") as ctx:
        torch.manual_seed(0)
        model = create_transformer(V, V, "tiny", dropout=0.0)
        # plain SGD: Adam's first steps are ~lr*sign(grad), which turns rounding noise in tiny gradients into lr-sized differences
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        train = token_batch_loader(copy_pairs(400, seed=0), 200, seed=0)          # this rank's share
        val = token_batch_loader(copy_pairs(60, seed=1), 200, shuffle=False)
        snaps = []
        # K processes with accum_steps=1 see the same global batch as 1 process with accum_steps=K
        options = FitOptions(max_steps=steps, accum_steps=1 if ctx.world_size > 1 else 2, validate_every=steps,
                             progress=False, checkpoint_dir=f"{out}/ck",
                             on_step=lambda st: snaps.append([p.detach().clone() for p in model.parameters()]))
        state = fit(model, train, opt, options=options, val_loader=val)
        check_replicas_in_sync(model)
        torch.save({"snaps": snaps, "val": state.val_loss, "loss": state.train_loss, "world": ctx.world_size},
                   f"{out}/rank{ctx.rank}_of{ctx.world_size}.pt")
""")


def test_two_processes_match_one_process(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    ddp, single = tmp_path / "ddp", tmp_path / "single"
    r = subprocess.run([str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", str(tmp_path / "worker.py"), str(ddp), str(STEPS)],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([sys.executable, str(tmp_path / "worker.py"), str(single), str(STEPS)],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r0, r1 = torch.load(ddp / "rank0_of2.pt"), torch.load(ddp / "rank1_of2.pt")
    one = torch.load(single / "rank0_of1.pt")
    assert len(r0["snaps"]) == len(r1["snaps"]) == len(one["snaps"]) == STEPS
    for step, (a, b, c) in enumerate(zip(r0["snaps"], r1["snaps"], one["snaps"]), 1):
        for pa, pb, pc in zip(a, b, c):
            assert torch.equal(pa, pb), f"ranks differ after update {step}"                 # replicas identical
            assert (pa - pc).abs().max() <= 1e-5, f"DDP differs from one process after update {step}"
    assert not torch.equal(r0["snaps"][0][0], r0["snaps"][-1][0])                          # training moved the weights
    # the logged loss is the global one, equal on both ranks and to the single process's
    for (s0, l0, _), (s1, l1, _), (s, l, _) in zip(r0["loss"], r1["loss"], one["loss"]):
        assert l0 == l1 and abs(l0 - l) <= 1e-5 * max(1, abs(l))
    # validation loss is all-reduced: every rank reports the loss over the whole validation set
    assert r0["val"] == r1["val"] and abs(r0["val"][-1][1] - one["val"][-1][1]) <= 1e-5
    # only rank 0 writes checkpoints; each holds the random states of every rank
    cks = sorted((ddp / "ck").glob("*.pt"))
    assert [p.name for p in cks] == [f"step_{STEPS:08d}.pt"]
    ck = torch.load(cks[0], weights_only=True)
    assert len(ck["rng"]) == 2 and ck["train_state"]["step"] == STEPS


def test_bf16_step_on_cpu_is_finite_and_close_to_fp32():
    from annotated_transformer.training import FitOptions, fit
    from annotated_transformer.model import create_transformer
    from annotated_transformer.batching import token_batch_loader
    from annotated_transformer.optimizer import make_optimizer
    from annotated_transformer.copy_task import copy_pairs, COPY_VOCAB_SIZE as V
    losses = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = create_transformer(V, V, "tiny", dropout=0.0)
        st = fit(model, token_batch_loader(copy_pairs(200), 400, seed=0), make_optimizer(model, lr=1e-3),
                 options=FitOptions(max_steps=2, precision=precision, progress=False))
        losses[precision] = [l for _, l, _ in st.train_loss]
        assert all(torch.isfinite(p).all() for p in model.parameters())
    for a, b in zip(losses["fp32"], losses["bf16"]):
        assert math.isfinite(b) and abs(a - b) <= 0.02 * a, losses


def test_copy_cli_under_torchrun(tmp_path):
    r = subprocess.run([str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", "-m", "annotated_transformer", "train",
                        "--task", "copy", "--max-steps", "6", "--max-train-pairs", "1000", "--json",
                        "--checkpoint-dir", str(tmp_path), "--save-every", "3"],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    assert len(lines) == 1                                                  # only rank 0 prints
    res = json.loads(lines[0])
    assert res["world_size"] == 2 and res["steps"] == 6
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["step_00000003.pt", "step_00000006.pt"]
