"""Shared fixtures of the neurons views' tests: random checkpoints of every family, loaded as the lab loads them."""

from __future__ import annotations

import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from tests.helpers.family_models import build

FAMILIES = ("bert", "distilbert", "albert", "roberta", "electra-generator", "electra-discriminator")


@pytest.fixture(scope="session")
def family(tmp_path_factory):
    """family(name) -> a Checkpoint of tests/helpers/family_models.py's random model, built once a session."""
    made = {}

    def get(name: str):
        if name not in made:
            folder = tmp_path_factory.mktemp(f"neurons-{name}")
            build(name, folder)
            made[name] = load_checkpoint(folder)
        return made[name]

    return get
