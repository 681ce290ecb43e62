"""What the neurons' numbers say, in sentences written from them; the caveat beside a value reading; the limits of
the whole page; rows for CSV and JSON. Nothing here is canned: every number and verdict in a sentence is read from
the record it describes, and the sentence turns around when the numbers do."""

from __future__ import annotations

import numpy as np

from bertviz_lab.views.neurons.behind import BehindView, NiuView
from bertviz_lab.views.neurons.neuron import NeuronView
from bertviz_lab.views.neurons.outliers import OutliersView
from bertviz_lab.views.neurons.sentence import SentenceView

VALUE_READING = ("What a neuron writes is read from its weights: its value vector through the MLM head's matrices, "
                 "leaving out the layers above it and the head's nonlinear parts. It is a reading of the weights, not "
                 "a test: switching the neuron off is the test.")
LIMITS = ("What this page does not show. A weight is not an explanation: a neuron's value promotes tokens only "
          "through the layers above it. One sentence is not evidence: try the built-in guesses and your own. A "
          "neuron's top contexts over a corpus are what it responds to there, not its meaning: another corpus may "
          "show another pattern, and most neurons respond to many. And \"knowledge neurons\" are an "
          "oversimplification (Niu et al. 2024): the neurons behind a fact move grammar too, so read the causal "
          "test of a grammatical guess beside that of a fact before calling any neuron a store of knowledge.")


def _n(value: float) -> str:
    """A number as the sentences print it: 2 decimals, or 3 significant digits when it is small."""
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.3g}"


def _two(a: float, b: float) -> tuple[str, str]:
    """Two numbers with as many decimals (2 to 6) as it takes to tell them apart."""
    for places in range(2, 7):
        x, y = f"{a:.{places}f}", f"{b:.{places}f}"
        if x != y:
            return x, y
    return x, y


def _quote(token: str) -> str:
    return f"'{token}'"


def sentence_sentences(view: SentenceView) -> list[str]:
    """The most active neurons at the chosen token and the factors, in sentences."""
    token = view.tokens[view.token]
    at = view.activations[view.layer, view.token]  # (N,)
    firing = int((at > 0).sum())
    out = [f"At {_quote(token)} (token {view.token}), {firing} of layer {view.layer}'s {view.width:,} neurons are "
           f"above 0; the most active is neuron {view.top[0].neuron} at {_n(view.top[0].activation)}, the median "
           f"{_n(float(np.median(at)))}."]
    if view.top[0].promoted:
        out.append(f"Neuron {view.top[0].neuron}'s value promotes {', '.join(map(_quote, view.top[0].promoted[:3]))} "
                   "most (a reading of its weights, below).")
    f = view.factors
    peaks = [view.tokens[int(i)] for i in f.strengths.argmax(0)]
    out.append(f"{f.strengths.shape[1]} factors explain all but {f.error:.0%} of the layer's activations over the "
               f"sentence; they peak at " + ", ".join(f"{_quote(t)} (factor {i + 1})" for i, t in enumerate(peaks))
               + "." + (f" Negative activations, {f.clipped:.0%} of the total, were read as 0." if f.clipped >= 0.005
                        else ""))
    if view.guesses:
        word, p = view.guesses[0]
        out.append(f"The model's top guess at the [MASK] is {_quote(word)} (p = {p:.3f}).")
    return out


def switch_sentence(view: NeuronView) -> str:
    """What switching the neuron off (zeroed, and set to its corpus mean) does to F and to the top guess ("" : no
    switch-off)."""
    s = view.switch
    if s is None:
        return ""
    name = f"neuron {view.neuron} of layer {view.layer}"
    def moved(f_after: float, guess: str) -> str:
        change = f_after - s.f
        verb = "raises" if change > 0 else "lowers" if change < 0 else "leaves"
        before, after = _two(s.f, f_after)
        amount = f" (by {_n(abs(change))})" if change else " (unchanged)"
        guess_part = "" if not guess else (f", and the top guess stays {_quote(guess)}" if guess == view.guess
                                           else f", and the top guess becomes {_quote(guess)}")
        return f"{verb} {view.metric} from {before} to {after}{amount}{guess_part}"
    return (f"Switching {name} off at every token {moved(s.f_zero, view.guess_zero)}; setting it to its corpus mean "
            f"({_n(view.mean)}) instead {moved(s.f_mean, view.guess_mean)}.")


def neuron_sentences(view: NeuronView) -> list[str]:
    """Where the neuron fires over the corpus, what its value promotes, and what switching it off does."""
    name = f"Neuron {view.neuron} of layer {view.layer}"
    out = []
    if view.contexts:
        counts: dict[str, int] = {}
        for token in view.firing:
            counts[token] = counts.get(token, 0) + 1
        common, times = max(counts.items(), key=lambda kv: (kv[1], -view.firing.index(kv[0])))
        where = f" over {view.corpus}" if view.corpus else ""
        out.append(f"{name} fires most{where} at {_quote(view.contexts[0].token)} ({_n(view.contexts[0].value)}); "
                   f"{times} of its top {len(view.contexts)} contexts fire at {_quote(common)}, against a mean of "
                   f"{_n(view.mean)} over the corpus's tokens.")
    else:
        out.append(f"{name} has no contexts in this corpus.")
    if view.promoted is None:
        out.append(f"Its value: {view.no_head}.")
    else:
        out.append(f"Its value promotes {', '.join(_quote(w) for w, _ in view.promoted[:3])} and suppresses "
                   f"{', '.join(_quote(w) for w, _ in view.suppressed[:3])} (a reading of its weights, not a test).")
    sentence = switch_sentence(view)
    if sentence:
        out.append(sentence)
    return out


def attribution_sentence(view: BehindView) -> str:
    """The top neuron, and how well the attribution adds up (integrated gradients' completeness)."""
    a, top = view.attribution, view.top[0]
    words = f" (its value promotes {_quote(top.promoted)} most)" if top.promoted else ""
    out = (f"{view.metric} is {_n(a.f)}. The neuron with the largest attribution is neuron {top.neuron} of layer "
           f"{top.layer}{words}: {_n(top.score)} of it.")
    if a.method == "ig":
        worst = int(np.argmax(np.abs(a.gaps)))
        out += (f" In each layer the attributions add up to F minus F with that layer's activations here set to 0, "
                f"to within {abs(a.gaps[worst]):.2g} (layer {worst}, {a.steps} steps).")
    return out


def _moves(drop: float) -> str:
    """A drop in F in words: "lower it by 0.12", "raise it by 0.02"."""
    return f"lower it by {_n(drop)}" if drop >= 0 else f"raise it by {_n(-drop)}"


def causal_sentence(view: BehindView) -> str:
    """The causal test: the top k neurons' drop against the random draws', and which is larger."""
    t = view.test
    drops = t.drops
    layers = sorted({layer for layer, _ in t.neurons})
    where = "layer" + ("s " + ", ".join(map(str, layers[:-1])) + " and " + str(layers[-1]) if len(layers) > 1
                       else f" {layers[0]}")
    change = "lowers" if t.drop_top > 0 else "raises"
    before, after = _two(t.f, t.f_top)
    first = (f"Switching off the {t.k} neurons with the largest attribution {change} {view.metric} from {before} to "
             f"{after} (by {_n(abs(t.drop_top))}); {len(drops)} sets of {t.k} random neurons from the same "
             f"{where} {_moves(float(drops.mean()))} on average (the largest drop {_n(float(drops.max()))}, spread "
             f"{_n(t.spread)})")
    if t.beats_random:
        return first + ": the top neurons matter more than random ones."
    if t.drop_top > float(drops.mean()):
        return first + (": the top neurons move it more than random ones on average, but not more than every draw, "
                        "so this test does not single them out.")
    return first + ": the top neurons matter no more than random ones here."


def niu_sentence(view: NiuView) -> str:
    """The grammatical and the word-knowledge guess side by side: whether the top neurons beat random ones on each."""
    parts = []
    for guess, behind in zip(view.guesses, view.views):
        t = behind.test
        verdict = "more than every random set" if t.beats_random else "no more than the random sets"
        parts.append(f"on the {guess.title} guess ('{guess.text}', {behind.metric}) its top {t.k} neurons lower F by "
                     f"{_n(t.drop_top)} against {_n(t.drop_random)} for random ones, {verdict}")
    both = [b.test.beats_random for b in view.views]
    if all(both):
        end = (" The attribution finds neurons that matter for grammar as well as for a fact: the test alone does "
               "not make the fact's neurons a store of knowledge (Niu et al. 2024).")
    elif not any(both):
        end = " On neither guess do the top neurons stand out from random ones here."
    else:
        which = [g.title for g, b in zip(view.guesses, both) if b][0]
        end = f" Only on the {which} guess do the top neurons stand out from random ones here."
    return "Side by side: " + "; ".join(parts) + "." + end


def outlier_sentences(view: OutliersView) -> list[str]:
    """Which dimensions stand out, and what zeroing them does to the held-out loss against random dimensions."""
    o = view.outliers
    a, b = view.dims
    z = np.abs(np.concatenate([o.weight_z.ravel(), o.bias_z.ravel()]))
    out = [f"Dimensions {a} and {b} are among the most outlying LayerNorm gains and biases in {int(o.counts[a])} and "
           f"{int(o.counts[b])} of {o.counts.sum()} places ({len(o.weight_dims)} layers × gain and bias × 2); the "
           f"largest is {z.max():.1f} standard deviations from its layer's median."]
    t = view.test
    if t is None:
        out.append(view.no_head[:1].upper() + view.no_head[1:] + ".")
        return out
    rise = t.loss_off - t.loss
    random = t.random_loss - t.loss
    first = (f"Zeroing dimensions {a} and {b} in every LayerNorm changes the held-out masked-LM loss from "
             f"{t.loss:.3f} to {t.loss_off:.3f} (by {rise:+.3f}; accuracy {t.accuracy:.1%} to {t.accuracy_off:.1%}) "
             f"on {t.masked:,} masked tokens of {view.sentences:,} sentences; {len(random)} random pairs change it by "
             f"{random.mean():+.3f} on average (largest {random.max():+.3f})")
    if t.beats_random:
        out.append(first + ": these dimensions matter more than random ones, as Kovaleva et al. found in BERT.")
    else:
        out.append(first + ": these dimensions matter no more than random ones in this model, unlike the outliers "
                           "Kovaleva et al. found in BERT.")
    return out


def top_rows(view: BehindView) -> list[dict]:
    """One row per top neuron, for a CSV file or the command's JSON."""
    return [{"layer": r.layer, "neuron": r.neuron, "attribution": r.score, "activation": r.activation,
             "promotes": r.promoted} for r in view.top]


def context_rows(view: NeuronView) -> list[dict]:
    """One row per top context."""
    return [{"rank": i + 1, "activation": c.value, "token": c.token, "position": c.position,
             "sentence": " ".join(c.tokens), "corpus_sentence": c.sentence} for i, c in enumerate(view.contexts)]


def json_report(sentence: SentenceView, neuron: NeuronView | None = None, behind: BehindView | None = None) -> dict:
    """What the `neurons --json` command prints: plain numbers and strings."""
    out = {"tokens": sentence.tokens, "layer": sentence.layer, "token": sentence.token, "neuron": sentence.neuron,
           "top_neurons": [{"neuron": t.neuron, "activation": t.activation, "promotes": list(t.promoted)}
                           for t in sentence.top],
           "factors": {"strengths": sentence.factors.strengths.tolist(), "error": sentence.factors.error},
           "guesses": [{"token": w, "p": p} for w, p in sentence.guesses], "reading": sentence_sentences(sentence)}
    if neuron is not None:
        s = neuron.switch
        out["neuron_view"] = {
            "layer": neuron.layer, "neuron": neuron.neuron, "mean": neuron.mean, "contexts": context_rows(neuron),
            "promotes": neuron.promoted, "suppresses": neuron.suppressed, "reading": neuron_sentences(neuron),
            "switch_off": None if s is None else {"metric": neuron.metric, "f": s.f, "f_zero": s.f_zero,
                                                  "f_mean": s.f_mean, "guess": neuron.guess,
                                                  "guess_zero": neuron.guess_zero, "guess_mean": neuron.guess_mean}}
    if behind is not None:
        t = behind.test
        out["behind"] = {"metric": behind.metric, "method": behind.attribution.method, "f": t.f,
                         "top": top_rows(behind), "f_top": t.f_top, "f_random": t.f_random.tolist(),
                         "drop_top": t.drop_top, "drop_random": t.drop_random, "beats_random": t.beats_random,
                         "reading": [attribution_sentence(behind), causal_sentence(behind)]}
    return out
