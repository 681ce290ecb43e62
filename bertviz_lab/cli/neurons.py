"""The `neurons` command: inside the feed-forward layer. One sentence's most active neurons and its factors, the
neurons a [MASK] guess rests on with the causal test against random neurons, or one neuron's top contexts over a
corpus, what it writes and what switching it off does (views/neurons/ computes every number), as aligned text with
sentences written from the numbers, or as JSON."""

from __future__ import annotations

import argparse
import json
import os
import textwrap

from bertviz_lab.cli.common import CHECKPOINT_HELP, load, printable
from bertviz_lab.cli.explain import Bar
from bertviz_lab.errors import InputError

PER_LAYER = 5  # neurons listed per layer at the chosen token

DESCRIPTION = """\
Inside the feed-forward layer: each layer's neurons (the entries of act(W_1 a + b_1), after the activation
function), read as key-value memories (Geva et al. 2021). Layers, neurons and tokens are counted from 0.

Without --neuron: the sentence's tokens, the most active neurons at token --token (default: the first [MASK], else
the first word) in every layer, the --k most active in --layer (default: the last) with the tokens each one's value
promotes, and that layer's activations factorised into --factors parts (non-negative matrix factorisation, as Ecco).
With a [MASK] too: the neurons the guess rests on (F = logit(--answer), or logit(--answer) - logit(--foil); default
answer: the top guess), attributed by --method ig (integrated gradients over the activation, Dai et al. 2022, the
default) or grad (activation x gradient), and the causal test: the top --k neurons switched off at the [MASK] against
--k random neurons of the same layers, --draws seeded draws (--seed).

With --neuron N (of --layer, default the last): its top contexts over the corpus (the story world's 2,000 sentences,
or --corpus FILE, a UTF-8 text file, one sentence a line), the firing token in [brackets]; the tokens its value
promotes and suppresses (read through the MLM head's matrices); and, with a [MASK], what switching it off at every
position (zeroed, and set to its corpus mean) does to the guess. The index of a corpus is built once per model and
kept on disk (beside the model, or in the cache folder), so a second run reads it.

With --json: the same numbers, every one exact, from views/neurons/reading.py's json_report. A mistake in the
input (a layer, neuron or token that does not exist, an empty, missing or huge corpus file, an answer that is not a
token): one line on stderr, exit status 2."""


def add_parser(sub) -> None:
    p = sub.add_parser("neurons", help="inside the feed-forward layer: a sentence's most active neurons and factors, "
                                       "the neurons behind a [MASK] guess with the causal test, or one neuron's top "
                                       "contexts, what it writes and what switching it off does",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    p.add_argument("--layer", type=int, metavar="L", help="the layer, from 0 (default: the last)")
    p.add_argument("--neuron", type=int, metavar="N", help="one neuron of the layer, from 0: its contexts, its value "
                                                           "and switching it off")
    p.add_argument("--token", type=int, metavar="I", help="the token position read, from 0 (default: the first "
                                                          "[MASK], else the first word)")
    p.add_argument("--corpus", metavar="FILE", help="with --neuron: a UTF-8 text file to find its top contexts in "
                                                    "(default: the story world)")
    p.add_argument("--answer", metavar="W", help="the word F scores at the [MASK] (default: the top guess)")
    p.add_argument("--foil", metavar="W", help="F = logit(answer) - logit(foil) (default: no foil)")
    p.add_argument("--k", type=int, metavar="K", help="top neurons listed and switched off by the causal test "
                                                      "(default 10)")
    p.add_argument("--draws", type=int, metavar="D", help="random draws of the causal test (default 20)")
    p.add_argument("--seed", type=int, metavar="S", help="the draws' and the factors' seed (default 0)")
    p.add_argument("--factors", type=int, metavar="F", help="NMF factors of the layer's activations (default 4)")
    p.add_argument("--method", default="ig", metavar="M", help="ig (integrated gradients, default) or grad")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("text", help='a sentence, with a [MASK] to ask about a guess: "she ate the [MASK] ."')


def ask_of(args):
    """The NeuronAsk the options name (each wrong value one InputError sentence)."""
    from bertviz_lab.views.neurons.ask import DRAWS, FACTORS, TOP_K, NeuronAsk

    if args.corpus is not None and args.neuron is None:
        raise InputError("--corpus is where one neuron's top contexts are found: add --neuron N (and --layer L)")
    return NeuronAsk(args.text, layer=args.layer, neuron=args.neuron, token=args.token,
                     factors=FACTORS if args.factors is None else args.factors, answer=args.answer or "",
                     foil=args.foil or "", k=TOP_K if args.k is None else args.k,
                     draws=DRAWS if args.draws is None else args.draws, seed=args.seed or 0, method=args.method)


def corpus_of(path: str | None):
    """The corpus of --corpus (read now, so a bad file is said before the model loads), else the story world."""
    from bertviz_lab.views.neurons.corpus import MAX_FILE_BYTES, story, uploaded

    if path is None:
        return story()
    if not os.path.isfile(path):
        raise InputError(f"there is no file {path}" + (" (it is a folder)" if os.path.isdir(path) else ""))
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # one byte past the limit is enough to refuse a huge file
    except OSError as exc:
        raise InputError(f"cannot read the corpus file {path}: {exc.strerror or exc}") from None
    return uploaded(os.path.basename(path), raw)


def cmd_neurons(args) -> int:
    from bertviz_lab.views.neurons.behind import behind_view
    from bertviz_lab.views.neurons.corpus import index as corpus_index
    from bertviz_lab.views.neurons.neuron import neuron_view
    from bertviz_lab.views.neurons.reading import json_report
    from bertviz_lab.views.neurons.sentence import sentence_view

    ask = ask_of(args)
    corpus = corpus_of(args.corpus) if args.neuron is not None else None
    ckpt = load(args)
    sentence = sentence_view(ckpt, ask)  # checks the layer, the neuron and the token against the model and text
    neuron = behind = None
    if corpus is not None:
        with Bar("neurons") as bar:
            index = corpus_index(ckpt, corpus, lambda f, _: bar(f, f"indexing {corpus.name}"))
        neuron = neuron_view(ckpt, index, ask, corpus.name)
    elif sentence.mask is not None or sentence.replaced is not None:
        behind = behind_view(ckpt, ask)
    if args.json:
        report = {**json_report(sentence, neuron, behind), "by_layer": by_layer(sentence)}
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print("\n".join(report_lines(sentence, neuron, behind)))
    return 0


def by_layer(sentence) -> list[dict]:
    """The PER_LAYER most active neurons at the chosen token in every layer: [{"layer", "neurons", "activations"}]."""
    import numpy as np

    out = []
    for layer, at in enumerate(sentence.activations[:, sentence.token]):  # (N,) each
        order = np.argsort(-at, kind="stable")[:PER_LAYER]
        out.append({"layer": layer, "neurons": [int(n) for n in order], "activations": [float(at[n]) for n in order]})
    return out


def _wrapped(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, 116, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def _tokens(tokens) -> str:
    return "  ".join(f"{i} {printable(t)}" for i, t in enumerate(tokens))


def sentence_lines(view) -> list[str]:
    """The tokens, the most active neurons at the token in every layer, the chosen layer's table and factors."""
    at = f"token {view.token} ({printable(view.tokens[view.token])})"
    lines = [*_wrapped("Tokens: " + _tokens(view.tokens)), "", f"Most active neurons at {at}, by layer "
             "(neuron: activation):"]
    for row in by_layer(view):
        lines.append(f"  layer {row['layer']}: " + "  ".join(f"{n}: {v:.3f}" for n, v in
                                                              zip(row["neurons"], row["activations"])))
    lines += ["", f"Layer {view.layer}, {at}: the {len(view.top)} most active neurons"]
    width = max(len("neuron"), *(len(str(t.neuron)) for t in view.top))
    lines.append(f"  {'neuron':>{width}}  activation  promotes")
    for t in view.top:
        promotes = ", ".join(printable(w) for w in t.promoted) or "(no MLM head)"
        lines.append(f"  {t.neuron:>{width}}  {t.activation:>10.4f}  {promotes}")
    f = view.factors
    lines += ["", f"Layer {view.layer}'s activations as {f.strengths.shape[1]} factors (NMF): {f.error:.1%} left "
                  f"unexplained, {f.clipped:.1%} of the magnitude below 0 set aside"]
    for k in range(f.strengths.shape[1]):
        peaks = sorted(range(len(view.tokens)), key=lambda i: -f.strengths[i, k])[:3]
        strongest = ", ".join(f"{i} {printable(view.tokens[i])} ({f.strengths[i, k]:.3f})" for i in peaks)
        lines.append(f"  factor {k + 1}: strongest at {strongest}; neurons "
                     + ", ".join(map(str, f.top_neurons(k))))
    if view.guesses:
        lines += ["", f"Guesses at the [MASK] (token {view.mask}): "
                  + ", ".join(f"{printable(w)} {p:.4f}" for w, p in view.guesses)]
    if view.replaced is not None:
        lines += ["", f"p(replaced) at {at}: {view.replaced:.4f}"]
    return lines


def behind_lines(view) -> list[str]:
    """The neurons behind the guess and the causal test."""
    from bertviz_lab.views.neurons.ask import METHODS
    from bertviz_lab.views.neurons.reading import attribution_sentence, causal_sentence

    test = view.test
    lines = ["", f"Neurons behind the guess at token {view.position}: F = {printable(view.metric)} = {view.f:.4f} "
                 f"({METHODS[view.attribution.method]}); the top {len(view.top)}"]
    lines.append("  layer  neuron     score  activation  promotes")
    for r in view.top:
        lines.append(f"  {r.layer:>5}  {r.neuron:>6}  {r.score:>8.4f}  {r.activation:>10.4f}  "
                     f"{printable(r.promoted) or '-'}")
    lines += _wrapped(f"Causal test: the top {test.k} switched off at token {view.position}: F {test.f:.4f} -> "
                      f"{test.f_top:.4f} (drop {test.drop_top:.4f}); {len(test.f_random)} random sets of {test.k} "
                      f"from the same layers (seed {test.seed}): drop {test.drop_random:.4f} +- {test.spread:.4f} "
                      f"(largest {max(test.drops):.4f}): the top neurons {'' if test.beats_random else 'do not '}"
                      "move F more than every random set")
    for sentence in (attribution_sentence(view), causal_sentence(view)):
        lines += _wrapped(sentence)
    return lines


def neuron_lines(view) -> list[str]:
    """One neuron: its top contexts with the firing token in brackets, its value, switching it off."""
    from bertviz_lab.views.neurons.reading import neuron_sentences

    lines = ["", f"Neuron {view.neuron} of layer {view.layer}: its top {len(view.contexts)} contexts over "
                 f"{printable(view.corpus)} (mean activation {view.mean:.4f})"]
    for c in view.contexts:
        words = " ".join(f"[{printable(t)}]" if i == c.position else printable(t) for i, t in enumerate(c.tokens))
        lines += _wrapped(f"{c.value:>8.4f}  {words}", "  ")
    if view.promoted is None:
        lines += _wrapped(view.no_head)
    else:
        lines += _wrapped("Promotes: " + ", ".join(f"{printable(w)} {s:+.3f}" for w, s in view.promoted))
        lines += _wrapped("Suppresses: " + ", ".join(f"{printable(w)} {s:+.3f}" for w, s in view.suppressed))
    if view.switch is not None:
        s = view.switch
        lines += _wrapped(f"Switched off at every position: F = {printable(view.metric)} {s.f:.4f} -> "
                          f"{s.f_zero:.4f} zeroed (top guess {printable(view.guess_zero) or '-'}), {s.f_mean:.4f} at "
                          f"its mean (top guess {printable(view.guess_mean) or '-'}); before: "
                          f"{printable(view.guess) or '-'}")
    return lines + [line for sentence in neuron_sentences(view) for line in _wrapped(sentence)]


def report_lines(sentence, neuron=None, behind=None) -> list[str]:
    """The readable report: the sentence's view, then the neuron's or the guess's, then the page's limits."""
    from bertviz_lab.views.neurons.reading import LIMITS, sentence_sentences

    lines = sentence_lines(sentence)
    lines += [""] + [line for s in sentence_sentences(sentence) for line in _wrapped(s)]
    if neuron is not None:
        lines += neuron_lines(neuron)
    if behind is not None:
        lines += behind_lines(behind)
    return [*lines, "", *_wrapped(LIMITS)]



COMMANDS = {"neurons": cmd_neurons}
