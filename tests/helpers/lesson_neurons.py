"""The Lesson's neuron step read back in a test, computed here without the step's views: the neuron and sentence its
question names, the clearest neuron of an index counted neuron by neuron, and the neuron's activation at each word by
a forward pre-hook on the layer's W_2. tests/pages/test_lesson_neurons.py and tests/pages/test_lesson.py use them."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import torch

from bertviz_lab.bert.ops import twin
from bertviz_lab.views.lesson.vector_steps import shown

QUESTION = re.compile(r"Neuron (\d+) of layer (\d+) on “(.*)”: on which word does it fire most\?")


def clearest(index, specials) -> tuple[int, int, int]:
    """(layer, neuron, share): the largest count of one word (letters only) among a neuron's top contexts, the mean
    of its top values breaking ties, counted neuron by neuron."""
    best = None
    L, N, _ = index.values.shape
    for layer in range(L):
        for neuron in range(N):
            words = Counter(c.tokens[c.position] for c in index.contexts(layer, neuron)
                            if c.tokens[c.position] not in specials and shown(c.tokens[c.position]).isalpha())
            share = max(words.values(), default=0)
            key = (share, float(np.mean(index.values[layer, neuron])))
            if best is None or key > best[0]:
                best = key, (layer, neuron, share)
    return best[1]


def asked(at):
    """(neuron, layer, the sentence) as the question names them."""
    question = next(m.value for m in at.markdown if "Predict, then reveal" in m.value).replace("\\", "")
    neuron, layer, sentence = QUESTION.search(question).groups()
    return int(neuron), int(layer), sentence


def activations(ckpt, layer: int, neuron: int, sentence: str) -> dict[str, float]:
    """The neuron's activation at each word of the sentence, by a forward hook on the layer's W_2 (what it reads)."""
    encoding = ckpt.tokenizer.encode(sentence)
    kept = []
    model = twin(ckpt.model)  # the textbook path, where W_2 is a module of its own
    module = model.bert.encoder.layer[layer].output.dense
    module.register_forward_pre_hook(lambda _m, args: kept.append(args[0]))
    with torch.no_grad():
        model(torch.tensor([encoding.ids]))
    values = kept[0][0, :, neuron].double().numpy()
    words = [i for i, special in enumerate(encoding.special_mask) if not special]
    tokens = [shown(encoding.tokens[i]) for i in words]
    return {t if tokens.count(t) == 1 else f"{t} ({n})": float(values[i]) for n, (t, i) in enumerate(zip(tokens, words))}


def expected(ckpt, at) -> tuple[str, set]:
    """The step's answer (the word of largest activation) and the words it accepts (within NEAR of it, as a share)."""
    from bertviz_lab.views.lesson.questions import NEAR

    neuron, layer, sentence = asked(at)
    values = activations(ckpt, layer, neuron, sentence)
    best = max(values, key=values.get)
    return best, {w for w, v in values.items() if values[best] - v < NEAR * values[best]}
