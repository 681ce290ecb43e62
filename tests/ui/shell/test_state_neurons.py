"""The feed-forward page's session keys (ui/shell/state_neurons.py): named for their page, one each, opening on a
sentence with a [MASK], and every input a link carries (ui/shell/links.py) read back into its own key, a value out of
range refused by its reader."""

from __future__ import annotations

import pytest

from bertviz_lab.ui.shell import links
from bertviz_lab.ui.shell.state import Key
from bertviz_lab.ui.shell.state_neurons import CORPORA, DEFAULT_TEXT, SECTIONS, Neurons


def test_the_keys_are_the_pages_own_and_open_on_a_masked_sentence():
    keys = [v for v in vars(Neurons).values() if isinstance(v, Key)]
    assert all(k.name.startswith("neurons.") for k in keys) and len({k.name for k in keys}) == len(keys)
    assert Neurons.TEXT.default == DEFAULT_TEXT and "[MASK]" in DEFAULT_TEXT
    assert Neurons.CORPUS.default in CORPORA and Neurons.SECTION.default is None  # None: the first tab
    assert set(Neurons.INPUTS) <= set(keys) and Neurons.UPLOAD not in Neurons.INPUTS  # a file never goes in a link


def test_a_link_carries_every_input_and_reads_each_value_back():
    params = {p.key: p for p in links.PAGES["neurons"]}
    assert set(params) == set(Neurons.INPUTS)
    assert params[Neurons.SECTION].read(SECTIONS[2]) == "Neurons behind the guess"
    assert params[Neurons.NEURON].read("17") == 17 and params[Neurons.METHOD].read("grad") == "grad"


@pytest.mark.parametrize(("key", "bad"), [(Neurons.SECTION, "Everything"), (Neurons.NEURON, "-1"),
                                          (Neurons.FACTORS, "11"), (Neurons.METHOD, "saliency"),
                                          (Neurons.CORPUS, "wikipedia"), (Neurons.K, "0")])
def test_a_value_out_of_range_is_refused(key, bad):
    param = next(p for p in links.PAGES["neurons"] if p.key == key)
    with pytest.raises(ValueError):
        param.read(bad)
