#!/usr/bin/env bash
# The user's install, not the developer's: build the wheel, install it into a second, clean venv with the
# runtime dependencies only (no [dev], no extras), and run the CLI from a folder outside the clone, with no
# data root and an empty cache (nothing may download). One "user-install: PASS|FAIL NAME" line per check,
# then "user-install: N passed, N failed"; exits 1 if any failed. .ci/run adds these to its totals;
# `bash .ci/user_install.sh` runs it alone (3 to 4 minutes on 2 busy cores, a minute of it removing the venv).
set -uo pipefail
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# A user's machine: no data root, no developer venv (on PATH when .ci/run calls this), no clone on the import path.
[ -n "${VIRTUAL_ENV:-}" ] && PATH=$(echo "$PATH" | tr : '\n' | grep -vxF "$VIRTUAL_ENV/bin" | paste -sd:)
unset ANNOTATED_TRANSFORMER_DATA VIRTUAL_ENV PYTHONPATH PYTHONHOME
# Any download attempt fails at once instead of reaching the network.
export ANNOTATED_TRANSFORMER_DATA_URL="file:///nonexistent/no-downloads-in-the-user-install-check/"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/user-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT   # (finish removes it too, inside the time it reports)
start=$SECONDS n_pass=0 n_fail=0

# USER_INSTALL_VERBOSE=1 shows every command's output, not only a failed one's.
pass() { echo "user-install: PASS $1 ($(( SECONDS - t0 )) s)"; n_pass=$((n_pass + 1))
         [ -n "${USER_INSTALL_VERBOSE:-}" ] && sed 's/^/    | /' "$tmp/out" | tail -25; return 0; }
fail() { echo "user-install: FAIL $1 ($(( SECONDS - t0 )) s)"; sed 's/^/    | /' "$tmp/out" | tail -25; n_fail=$((n_fail + 1)); }
finish() { local t=$SECONDS; rm -rf "$tmp"
           echo "user-install: took $(( SECONDS - start )) s (removing the venv: $(( SECONDS - t )) s)"
           echo "user-install: $n_pass passed, $n_fail failed"
           [ "$n_fail" = 0 ]; exit; }
# check NAME CMD...: run CMD (from the temp folder, 5 minutes at most), output in $tmp/out; PASS if it exits 0.
check() { local name=$1; shift; t0=$SECONDS
          if (cd "$tmp/home" && timeout 300 "$@") >"$tmp/out" 2>&1; then pass "$name"; else fail "$name"; return 1; fi; }
mkdir -p "$tmp/home"

# 1. The wheel, built (with build isolation, as pip does for a user) from a copy of the tracked and new files,
#    so a stale build/ folder in the clone cannot slip old modules into it.
mkdir -p "$tmp/src" "$tmp/wheel"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf - | tar -xf - -C "$tmp/src"
else
  cp -r pyproject.toml README.md LICENSE annotated_transformer "$tmp/src/"
fi
echo "user-install: source copied ($(( SECONDS - start )) s)"
python3 -m venv "$tmp/venv" || { t0=$SECONDS; echo "python3 -m venv failed" >"$tmp/out"; fail "venv"; finish; }
export PATH="$tmp/venv/bin:$PATH"
py="$tmp/venv/bin/python"
check "wheel builds" "$py" -m pip wheel -q --no-deps -w "$tmp/wheel" "$tmp/src" || finish
wheel=$(ls "$tmp/wheel"/annotated_transformer-*.whl)

# 2. Install: the CPU build of torch first (from the local wheel, as .ci/run does), then the wheel with its
#    runtime dependencies only. The package must then import from the venv, and no dev-only package be there.
#    --no-compile: byte-compiling torch's files takes longer than the checks that follow (Python compiles on import).
check "install torch==2.13.0" "$py" -m pip install -q --no-compile torch==2.13.0 || finish
check "install the wheel (runtime dependencies only)" "$py" -m pip install -q --no-compile "$wheel" || finish
check "pip check" "$py" -m pip check
check "imports from the venv, no dev packages" "$py" -c "
import importlib.util as u, annotated_transformer as a, sys
assert a.__file__.startswith(sys.prefix), f'imported from {a.__file__}, not from the venv {sys.prefix}'
dev = [m for m in ('nbdev', 'pytest', 'hypothesis', 'ctranslate2', 'jupyter') if u.find_spec(m)]
assert not dev, f'dev-only or optional packages installed by the runtime dependencies: {dev}'"
cli="$tmp/venv/bin/annotated-transformer"
# From here on the CLI's cache (platformdirs) is empty, as on a new machine.
export XDG_CACHE_HOME="$tmp/cache" MPLCONFIGDIR="$tmp/mpl"

# 3. --help of the CLI and of every subcommand it lists (read from its own --help).
check "--help and --version" bash -c "'$cli' --version && '$cli' --help" || finish
cmds=$(awk '/^positional arguments:/{f=1;next} /^options:/{f=0} f&&/^    [a-z]/{print $1}' "$tmp/out")
t0=$SECONDS; echo "subcommands listed by --help: $(echo $cmds)" >"$tmp/out"
missing=$(for c in train translate evaluate attention; do echo "$cmds" | grep -qx "$c" || echo "$c"; done)
if [ -z "$missing" ]; then pass "--help lists the subcommands: $(echo $cmds)"; else fail "--help lists train translate evaluate attention (missing: $missing)"; fi
# Each subcommand's --help through the console script's function, all in one process (every start of the
# CLI imports torch: seconds apiece on 2 cores); the console script itself ran just above.
t0=$SECONDS
(cd "$tmp/home" && timeout 300 "$py" - $cmds) >"$tmp/help" 2>&1 <<'EOF'
import contextlib, io, sys
from annotated_transformer.cli import main
for c in sys.argv[1:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out): main([c, "--help"])
        rc = 0
    except SystemExit as e: rc = e.code or 0
    except Exception as e: rc = repr(e)
    ok = rc == 0 and f"usage: annotated-transformer {c}" in out.getvalue()
    print("ok" if ok else "bad", c, flush=True)
    if not ok: print(f"`annotated-transformer {c} --help`: exit {rc}\n{out.getvalue()}")
EOF
cp "$tmp/help" "$tmp/out"
for c in $cmds; do   # the first line carries the process's time, the others 0 s
  if grep -qx "ok $c" "$tmp/help"; then pass "$c --help"; else fail "$c --help"; fi; t0=$SECONDS; done

# 4. The shipped models: translate both ways, and score de-en on a few sentences of the shipped sample.
check "translate (shipped de-en)" bash -c "'$cli' translate 'Ein Hund läuft über die Wiese.' | tee /dev/stderr | grep -qi dog"
check "translate --model en-de" bash -c "'$cli' translate --model en-de 'A dog runs across the meadow.' | tee /dev/stderr | grep -qi hund"
sample=$("$py" -c "from annotated_transformer.data import SAMPLE_DIR; print(SAMPLE_DIR)")
check "evaluate (shipped sample, 20 sentences)" bash -c "'$cli' evaluate --model de-en --data-dir '$sample' --split test --max-sentences 20 --json | tee /dev/stderr | grep -q bleu"

# 5. Training: the copy task, briefly.
check "train --task copy" "$cli" train --task copy --max-steps 50 --checkpoint-dir "$tmp/home/copy"

# 6. Your own corpus (a few hundred lines of the shipped sample, as plain files), then the checkpoint it wrote:
#    n-best translation and attention maps.
mkdir -p "$tmp/home/corpus"
for l in de en; do
  gzip -dc "$sample/train.$l.gz" | head -n 400 >"$tmp/home/corpus/train.$l"
  gzip -dc "$sample/val.$l.gz" | head -n 40 >"$tmp/home/corpus/valid.$l"
done
if check "train on your own corpus" "$cli" train --train corpus/train --valid corpus/valid --src de --tgt en \
     --recipe tiny --max-steps 30 --beam-size 1 --checkpoint-dir "$tmp/home/own"; then
  ckpt=$(ls "$tmp/home/own"/step_*.pt | tail -1)
  check "translate --checkpoint --n-best 2" bash -c "'$cli' translate --checkpoint '$ckpt' --n-best 2 'Ein Hund läuft.' | tee /dev/stderr \
    | awk -F'\t' 'NF==4{n++} END{exit n!=2}'"
  check "attention --checkpoint --output x.png" bash -c "'$cli' attention --checkpoint '$ckpt' --output x.png 'Ein Hund läuft.' \
    && [ \"\$(head -c 4 x.png | tail -c 3)\" = PNG ]"
else
  t0=$SECONDS; echo "no checkpoint: training on the own corpus failed" >"$tmp/out"
  fail "translate --checkpoint --n-best 2"; fail "attention --checkpoint --output x.png"
fi

# 7. The reader's exercises, as a reader outside the clone gets them: `exercises 02` writes the chapter's notebook; its
#    cells run as written (each check: not answered yet), then with a wrong answer (a known mistake: caught, with its
#    hint), then with the right one (the chapter's folded solution, read from the source copy: ✔).
cat >"$tmp/exercises.py" <<'EOF'
import glob, json, re, sys
from annotated_transformer.exercises import EXERCISES, exercise_section, solutions
nb = json.load(open("ex02.ipynb", encoding="utf-8"))
chapter = json.load(open(glob.glob(sys.argv[1] + "/02_*.ipynb")[0], encoding="utf-8"))
right = dict(s for c in exercise_section(chapter) if c["cell_type"] == "markdown" for s in solutions("".join(c["source"])))
env, n = {}, 0
for c in nb["cells"]:
    if c["cell_type"] != "code": continue
    src = "\n".join("pass" if l.lstrip().startswith("%") else l for l in c["source"].splitlines())  # %pip: IPython's
    exec(src, env)                                                             # as written: the placeholders
    for ex, name in re.findall(r'check\("(\d\d\.\d+)", (\w+)\)', src):
        v = env["check"](ex, env[name]); print("as written:", v); assert not v and "not answered yet" in v.line
        if EXERCISES[ex].mistakes:
            env[name] = EXERCISES[ex].mistakes[0].answer                       # a wrong answer
            v = env["check"](ex, env[name]); print("wrong:     ", v)
            assert not v and v.mistake == EXERCISES[ex].mistakes[0].name
        exec(right[ex], env)                                                   # the right one
        v = env["check"](ex, env[name]); print("right:     ", v); assert v; n += 1
assert n == len(right) >= 2, (n, sorted(right))
print(f"{n} exercises: unanswered, wrong and right answers each checked")
EOF
check "exercises 02: the reader's notebook checks a wrong answer, then a right one" \
  bash -c "'$cli' exercises 02 --output ex02.ipynb && '$py' '$tmp/exercises.py' '$tmp/src/nbs'"
finish
