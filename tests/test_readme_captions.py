"""Where the README first shows `annotated-transformer translate`, it says what the shipped models are: caption
translators that fail on everyday sentences, measured by the Tatoeba BLEU of their stored result
(nbs/models/NAME.json), a number the README takes from that file and never has typed into nbs/index.ipynb."""
import json, re
from pathlib import Path
from annotated_transformer.pretrained import SHIPPED

ROOT = Path(__file__).resolve().parents[1]


def tatoeba_bleu(name: str) -> float:
    "The Tatoeba BLEU of a shipped model's one stored result."
    stored = json.loads((ROOT / "nbs" / "models" / f"{name}.json").read_text(encoding="utf-8"))
    return next(r["bleu"] for r in stored["sets"] if r["set"] == "tatoeba")


def after_first_translate(readme: str) -> str:
    "The prose right after the first code block that runs `annotated-transformer translate`, to the next block."
    blocks = list(re.finditer(r"^```[^\n]*\n.*?^```$", readme, re.M | re.S))
    first = next(b for b in blocks if "annotated-transformer translate" in b[0])
    return readme[first.end():].split("\n```", 1)[0]


def test_the_readme_says_the_models_translate_captions_where_translate_is_first_shown():
    text = after_first_translate((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "caption" in text.lower() and "Tatoeba" in text, f"no word of captions or Tatoeba there:\n{text[:600]}"
    for name in SHIPPED:
        b = f"{tatoeba_bleu(name):.1f}"
        assert re.search(rf"(?<![\d.]){re.escape(b)}(?![\d])[^.;]*?\b{name}\b", text), \
            f"the {name} model's Tatoeba BLEU {b} (nbs/models/{name}.json) is not given there:\n{text[:600]}"


def test_the_tatoeba_scores_are_computed_not_typed():
    "nbs/index.ipynb's prose never types a Tatoeba BLEU; a code cell reads it from nbs/models/NAME.json."
    cells = json.loads((ROOT / "nbs" / "index.ipynb").read_text(encoding="utf-8"))["cells"]
    prose = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    for name in SHIPPED:
        b = f"{tatoeba_bleu(name):.1f}"
        assert not re.search(rf"(?<![\d.]){re.escape(b)} BLEU", prose), f"{b} BLEU typed into nbs/index.ipynb"
    assert any(c["cell_type"] == "code" and "models/" in "".join(c["source"]) and "tatoeba" in "".join(c["source"])
               for c in cells), "no cell of nbs/index.ipynb reads the stored scores"
