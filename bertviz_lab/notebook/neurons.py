"""Inside the feed-forward layer, in a notebook: one call, `neurons`, returning a `Neurons` record with the numbers
of the page's views (views/neurons/) and its figures (figures/neurons.py): the sentence's activations, the most
active neurons at a token and the factors; with a [MASK], the neurons behind the guess and the causal test; with a
neuron, its top contexts over a corpus, what it writes and what switching it off does. A corpus's index is read
once per Lab (and kept on disk by the weights' hash, so another session reads it too)."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass

import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.figures.neurons import (activation_heatmap, attribution_bar, causal_test, factor_strips,
                                         neuron_label)
from bertviz_lab.notebook.lab import Bar, lab_of, sentence_list
from bertviz_lab.views.neurons.ask import DRAWS, FACTORS, STEPS, TOP_K, NeuronAsk
from bertviz_lab.views.neurons.behind import BehindView, behind_view
from bertviz_lab.views.neurons.corpus import MAX_FILE_BYTES, Sentences, story, uploaded
from bertviz_lab.views.neurons.corpus import index as corpus_index
from bertviz_lab.views.neurons.neuron import NeuronView, neuron_view
from bertviz_lab.views.neurons.reading import (LIMITS, attribution_sentence, causal_sentence, neuron_sentences,
                                               sentence_sentences)
from bertviz_lab.views.neurons.sentence import SentenceView, sentence_view


@dataclass(frozen=True)
class Neurons:
    """What the feed-forward layers do on one sentence: `sentence` (views.neurons.sentence.SentenceView: every
    layer's activations (L, T, N), the top neurons at the token, the factors), `neuron` (NeuronView, with a neuron:
    its contexts, value and switch-off; else None), `behind` (BehindView, for a [MASK] without a neuron: the
    attribution and the causal test; else None), and `said`, the sentences written from these numbers.
    `figures()` draws them; a notebook cell shows the figures, the contexts and the sentences."""

    sentence: SentenceView
    neuron: NeuronView | None
    behind: BehindView | None
    said: list[str]

    @property
    def tokens(self) -> list[str]:
        return self.sentence.tokens

    @property
    def activations(self):
        """(L, T, N) float32: every layer's activations, after the activation function."""
        return self.sentence.activations

    @property
    def top(self) -> list[tuple[int, float]]:
        """(neuron, activation) of the most active neurons at the token in the chosen layer."""
        return [(t.neuron, t.activation) for t in self.sentence.top]

    def figures(self) -> list[go.Figure]:
        """The chosen layer's activations (the neuron asked about kept among the columns), its factors as strips,
        and with a guess, the attribution of the top neurons and the causal test."""
        s = self.sentence
        keep = (self.neuron.neuron,) if self.neuron is not None else ()
        labels = [f"factor {k + 1}: " + ", ".join(neuron_label(n) for n in s.factors.top_neurons(k, 3))
                  for k in range(s.factors.strengths.shape[1])]
        figs = [activation_heatmap(s.activations[s.layer], s.tokens, s.layer, keep=keep),
                factor_strips(s.factors.strengths, s.tokens, labels, f"Layer {s.layer}'s activations as "
                                                                     f"{len(labels)} factors (NMF)")]
        if self.behind is not None:
            b = self.behind
            figs.append(attribution_bar([neuron_label(r.neuron, r.layer) for r in b.top], [r.score for r in b.top],
                                        b.metric, f"The neurons behind {b.metric} ({b.attribution.method})"))
            figs.append(causal_test(b.test.drop_top, b.test.drops, b.test.k, b.metric,
                                    f"Switching off the top {b.test.k} against {b.test.k} random neurons"))
        return figs

    def _contexts(self) -> str:
        if self.neuron is None:
            return ""
        v = self.neuron
        rows = "".join("<li>" + f"{c.value:.3f}: " + " ".join(
            f"<b>{html.escape(t)}</b>" if i == c.position else html.escape(t) for i, t in enumerate(c.tokens))
            + "</li>" for c in v.contexts)
        written = "" if v.promoted is None else (
            "<p>Promotes: " + html.escape(", ".join(w for w, _ in v.promoted)) + "; suppresses: "
            + html.escape(", ".join(w for w, _ in v.suppressed)) + "</p>")
        return (f"<p>Neuron {v.neuron} of layer {v.layer}: its top contexts over {html.escape(v.corpus)}</p>"
                f"<ol>{rows}</ol>{written}")

    def _words(self) -> str:
        return self._contexts() + "".join(f"<p>{html.escape(s)}</p>" for s in self.said)

    def _repr_html_(self) -> str:
        return "".join(f.to_html(full_html=False, include_plotlyjs="cdn") for f in self.figures()) + self._words()

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        for fig in self.figures():
            display(fig)
        display(HTML(self._words()))

    def __repr__(self) -> str:
        s = self.sentence
        about = f"neuron {self.neuron.neuron} of layer {self.neuron.layer}, " if self.neuron is not None else ""
        return (f"<Neurons {about}layer {s.layer} at token {s.token} ({s.tokens[s.token]}), {s.layers} layers of "
                f"{s.width} neurons. " + " ".join(self.said) + ">")


def neurons(lab, text: str, layer: int | None = None, neuron: int | None = None, *, token: int | None = None,
            corpus=None, answer: str | None = None, foil: str | None = None, k: int = TOP_K, draws: int = DRAWS,
            seed: int = 0, factors: int = FACTORS, method: str = "ig", steps: int = STEPS) -> Neurons:
    """Inside the feed-forward layer on `text`. Layers, neurons and tokens count from 0; `layer` None is the last,
    `token` None the first [MASK] (else the first word).

    Always: every layer's activations (after the activation function), the most active neurons at `token` in
    `layer` with the tokens each one's value promotes, and the layer's activations factorised into `factors` parts
    (non-negative matrix factorisation, as Ecco; seeded by `seed`).

    With `neuron`: its top contexts over `corpus` (None: the story world's sentences; a list of sentences; or a
    path to a UTF-8 text file, one sentence a line), what its value promotes and suppresses (read through the MLM
    head's matrices: a reading of the weights, not a test), and with a [MASK], what switching it off at every
    position does to the guess (zeroed, and set to its corpus mean).

    Without `neuron`, for a [MASK]: the neurons the guess rests on, F = logit(`answer`) (default: the top guess),
    or logit(answer) - logit(`foil`), attributed by `method` ("ig": integrated gradients over the activation with
    `steps` points, Dai et al. 2022; "grad": activation x gradient), and the causal test: the top `k` switched off
    at the [MASK] against `k` random neurons of the same layers, `draws` seeded draws. One sentence is not
    evidence: the causal test says whether the top neurons beat random ones here, no more.
    """
    lab = lab_of(lab)
    ask = NeuronAsk(text, layer=layer, neuron=neuron, token=token, factors=factors, answer=answer or "",
                    foil=foil or "", k=k, draws=draws, seed=seed, method=method, steps=steps)
    if corpus is not None and neuron is None:
        raise InputError("corpus is where one neuron's top contexts are found: give neuron= (and layer=) too")
    found = corpus_of(corpus) if neuron is not None else None
    view = sentence_view(lab.checkpoint, ask)  # checks the layer, the neuron and the token
    one = behind = None
    if found is not None:
        def build():
            with Bar() as bar:
                return corpus_index(lab.checkpoint, found, lambda f, _: bar.fraction(f, f"indexing {found.name}"))

        index = lab.remember(("neuron index", found.sentences), build)
        one = neuron_view(lab.checkpoint, index, ask, found.name)
    elif view.mask is not None or view.replaced is not None:
        behind = lab.remember(("neurons behind", ask), lambda: behind_view(lab.checkpoint, ask))
    said = sentence_sentences(view)
    said += neuron_sentences(one) if one is not None else []
    said += [attribution_sentence(behind), causal_sentence(behind)] if behind is not None else []
    return Neurons(view, one, behind, [*said, LIMITS])


def corpus_of(corpus) -> Sentences:
    """`corpus` as Sentences: the story world (None), a list of sentences, or a UTF-8 text file's path."""
    if corpus is None:
        return story()
    if isinstance(corpus, (str, os.PathLike)):
        path = os.fspath(corpus)
        if not os.path.isfile(path):
            raise InputError(f"corpus {path!r} is not a file: give a path to a UTF-8 text file, or a list of "
                             "sentences")
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)  # past the limit by one byte: enough to refuse a huge file
        except OSError as exc:
            raise InputError(f"cannot read the corpus file {path}: {exc.strerror or exc}") from None
        return uploaded(os.path.basename(path), raw)
    sentences = sentence_list(corpus, "corpus")
    if not sentences:
        raise InputError("the corpus has no sentences: give at least one, or None for the story world")
    return Sentences(f"your {len(sentences):,} sentences", tuple(sentences))
