"""The trained models that ship with the book (chapter 32): usable from a fresh clone with no checkpoint, refused when a
file was changed, and reproducing the scores on their model cards.

The score check re-scores the first sentences of test_2016_flickr (see `ci_subset` in nbs/models/NAME.json, written by
tools/ship_model.py) and allows 1.0 BLEU: on the machine that shipped the model the score is identical, but another
CPU (AVX2 vs AVX-512) rounds differently and may flip a close beam-search decision on a sentence or two of 200."""
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest
from annotated_transformer.pretrained import MODELS_DIR, SHIPPED, SHIPPED_SHA256SUMS, WEIGHTS

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).parent / "annotated-transformer"
DATA_ENV = "ANNOTATED_TRANSFORMER_DATA"
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def cli(*args, input=None, **env):
    e = {**os.environ, "OMP_NUM_THREADS": "2", **{k: str(v) for k, v in env.items()}}
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, input=input, timeout=600, env=e)


def one_line_error(r, *needles):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles: assert n in lines[0], lines[0]


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_model_is_there_and_pinned(name):
    assert (MODELS_DIR / name / WEIGHTS).is_file(), f"{name} is not shipped"
    assert SHIPPED_SHA256SUMS[name], f"{name} ships without a pinned SHA256SUMS"
    assert (ROOT / "nbs" / "models" / f"{name}.json").is_file()


def test_translate_with_no_checkpoint_uses_the_shipped_model():
    r = cli("translate", "Ein Hund läuft über die Wiese.", "Zwei Kinder spielen im Sand.")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 2 and all(line.strip() for line in out)
    r = cli("translate", "--model", "en-de", "A dog runs across the meadow.")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    r = cli("translate", "--src", "en", input="A dog runs across the meadow.\n")   # --src en picks en-de
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


def test_shipped_model_used_the_other_way_round_is_refused():
    one_line_error(cli("translate", "--model", "de-en", "--src", "en", "A dog."), "translates de→en, not en→de")


def test_a_tampered_model_file_is_refused(tmp_path):
    copy = tmp_path / "de-en"
    shutil.copytree(MODELS_DIR / "de-en", copy)
    data = bytearray((copy / WEIGHTS).read_bytes())
    data[len(data) // 2] ^= 0x01                                  # one bit of one weight
    (copy / WEIGHTS).write_bytes(bytes(data))
    one_line_error(cli("translate", "--model", copy, "Ein Hund."), WEIGHTS, "sha256", "corrupt or was changed")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_evaluate_reproduces_the_model_card(name):
    if not os.environ.get(DATA_ENV):
        if IN_CI: pytest.fail(f"CI=true but ${DATA_ENV} is not set: CI must re-score the shipped models", pytrace=False)
        pytest.skip(f"${DATA_ENV} is not set: no Multi30k to re-score the shipped models on")
    card = json.loads((ROOT / "nbs" / "models" / f"{name}.json").read_text())
    sub = card["ci_subset"]
    r = cli("evaluate", "--model", name, "--split", sub["set"], "--max-sentences", sub["sentences"], "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert (res["model"], res["src"], res["tgt"]) == (name, card["src"], card["tgt"])
    assert res["sentences"] == sub["sentences"]
    assert abs(res["bleu"] - sub["bleu"]) <= 1.0, (res["bleu"], sub["bleu"])
    assert abs(res["chrf"] - sub["chrf"]) <= 1.0, (res["chrf"], sub["chrf"])


# ---- one source for every published score: nbs/models/NAME.json (tools/ship_model.py --rescore writes it) ------------

def _stored(name: str) -> dict: return json.loads((ROOT / "nbs" / "models" / f"{name}.json").read_text(encoding="utf-8"))


def _card_scores(text: str) -> tuple[str, dict[str, float]]:
    "The card's score section: its heading, and set -> BLEU from its table."
    sec = next(p for p in text.split("\n## ") if p.startswith("Scores"))
    rows = [l.split("|") for l in sec.splitlines() if l.startswith("| ") and not l.startswith("| set")]
    return sec.splitlines()[0], {r[1].strip(): float(r[3]) for r in rows}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_card_gives_the_stored_scores_and_their_search(name):
    stored = _stored(name)
    heading, scores = _card_scores((MODELS_DIR / name / "MODEL_CARD.md").read_text(encoding="utf-8"))
    assert scores == {r["set"]: round(r["bleu"], 2) for r in stored["sets"]}, (scores, stored["sets"])
    s = stored["search"]                                                  # the card names the search they came from
    assert f"beam {s['beam_size']}" in heading and f"α {s['length_penalty']}" in heading and "exact" in heading, heading
    assert "EOS" in s["at the length limit"] and "exact" in s["stopping"]
    ci = (MODELS_DIR / name / "MODEL_CARD.md").read_text(encoding="utf-8").split("## CI check")[1].split("## ")[0]
    assert f"| BLEU | {stored['ci_subset']['bleu']:.2f} |" in ci


def test_the_readme_and_the_chapters_give_the_stored_scores():
    "README (from nbs/index.ipynb) and chapter 16 quote test_2016_flickr BLEU only as the stored result has it."
    import re
    best = {n: next(r["bleu"] for r in _stored(n)["sets"] if r["set"] == "test_2016_flickr") for n in SHIPPED}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.findall(r"(\d\d\.\d+) (?:sacre)?BLEU on test_2016_flickr", readme)
    assert sorted(quoted) == sorted(f"{b:.1f}" for b in best.values()), (quoted, best)
    ch16 = json.loads((ROOT / "nbs" / "16_multi30k.ipynb").read_text(encoding="utf-8"))
    for c in ch16["cells"]:                                              # its saved tables: the stored numbers
        for o in c.get("outputs", []):
            md = "".join(o.get("data", {}).get("text/markdown", []))
            for set_name, bleu in re.findall(r"^\| (test_2016_flickr) \| [\d,]+ \| ([\d.]+) \|", md, re.M):
                assert float(bleu) in {round(b, 2) for b in best.values()}, (set_name, bleu, best)
        if c["cell_type"] == "markdown":                                 # no other test_2016_flickr BLEU in prose
            for line in "".join(c["source"]).splitlines():
                if "test_2016_flickr" in line:
                    for x in re.findall(r"\b(\d\d\.\d\d)\b", line):
                        assert float(x) in {round(b, 2) for b in best.values()}, line[:200]
