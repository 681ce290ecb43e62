"""The model shipped in checkpoints/: it loads, its card is complete, and it answers the seeds' examples."""

import json
import subprocess
import sys

from bertviz_lab.corpus import lexicon
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
SEATS = set(lexicon.SEATS.split()) | set(lexicon.FIXED_SEATS.split())  # what the corpus lets things sit on


def predict(text: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "bertviz_lab", "predict", "--checkpoint", str(SHIPPED),
                           "--json", "--top-k", "5", text], capture_output=True, text=True, cwd=ROOT, env=no_gpu_env(),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return [c["token"] for c in json.loads(done.stdout)["masks"][0]["candidates"]]


def test_shipped_model_is_small_and_carries_its_card():
    size = sum(f.stat().st_size for f in SHIPPED.iterdir())
    assert size < 30 * 2**20
    card = json.loads((SHIPPED / "model_card.json").read_text())
    held = card["held_out"]
    for key in ("mlm_top1", "mlm_top5", "nsp_acc"):
        assert 0 < held[key] <= 1
    assert card["corpus"].startswith("built-in") and card["steps"] > 0 and card["training_seconds"] > 0
    assert "publish" not in card["command"] and "train" in card["command"]


def test_the_cat_sat_on_something_to_sit_on():
    top = predict("the cat sat on the [MASK] .")
    assert SEATS & set(top[:3]), top


def test_deposit_money_at_the_bank():
    assert predict("i went to the [MASK] to deposit money .")[0] == "bank"
