"""Forked decoding workers leave quietly (issue 24): they inherit the CLI's SIGTERM handler, which raises `_Stopped` to
save a checkpoint, but a pool ends its workers with SIGTERM (`Pool.terminate`, at the end of its `with` block). Before,
two-worker runs could end with `Process ForkPoolWorker-2: Traceback … annotated_transformer.cli._Stopped: signal 15`.
The test terminates a worker while it is busy, so the signal always lands inside a live worker."""
import os, subprocess, sys, textwrap

CHILD = textwrap.dedent("""
    import multiprocessing as mp, time, torch
    from annotated_transformer.cli import _signals_stop
    from annotated_transformer.decoding import SearchOptions
    from annotated_transformer.evaluation import decode_corpus, _worker_init
    from annotated_transformer.model import create_transformer
    torch.manual_seed(0)
    model = create_transformer(20, 20, "tiny").eval()
    srcs = [[1, *torch.randint(4, 20, (n,)).tolist(), 2] for n in (3, 9, 1, 6, 4, 7, 2, 5)]
    with _signals_stop():                      # what `main` runs every command under
        hyps = decode_corpus(model, srcs, SearchOptions(beam_size=2, extra_len=5), batch_size=2, workers=2)
        pool = mp.get_context("fork").Pool(2, initializer=_worker_init, initargs=((model, srcs, {}, 0, "cpu", True),))
        busy = [pool.apply_async(time.sleep, (60,)) for _ in range(2)]
        time.sleep(1.0)                        # both workers are in time.sleep now
        pool.terminate()                       # SIGTERM to each
        pool.join()
    assert hyps == decode_corpus(model, srcs, SearchOptions(beam_size=2, extra_len=5), batch_size=2)
    print("decoded", len(hyps))
""")


def test_forked_workers_leave_without_a_traceback():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "decoded 8" in r.stdout
    assert "Traceback" not in r.stderr and "_Stopped" not in r.stderr, r.stderr
