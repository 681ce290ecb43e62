"""The `attribute` command: which tokens made the model guess what it guessed at a [MASK], by nine attribution
methods side by side (views/why/explanation.py runs them; explain/ holds the methods), as a table or as JSON."""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from typing import TYPE_CHECKING

from bertviz_lab.cli.common import CHECKPOINT_HELP, load, printable
from bertviz_lab.errors import InputError

if TYPE_CHECKING:  # imported where it is used: `attribute --help` should not wait for torch
    from bertviz_lab.views.why.ask import Ask

DESCRIPTION = """\
Explain one guess of a masked-LM: the score F is the target word's logit at the chosen [MASK] (with --contrast,
logit(target) - logit(contrast): "why mat rather than rug?"). Every token gets a value from each of nine
methods: attention, rollout and attention flow (Abnar & Zuidema 2020) and the value-weighted norm (Kobayashi et
al. 2020) read the attention, and value zeroing (Mohebbi et al. 2023: each token's value vectors zeroed in a layer,
how far the layer's outputs move, rolled out through the layers) how the layers mix the tokens: none of the five
reads F (the same for any --target or --contrast); gradient, gradient x input,
integrated gradients (Captum, 50 Gauss-Legendre steps from a [PAD] baseline) and occlusion (F minus F with that one
token masked) read F itself. Then Spearman's rho of every pair of methods over the word tokens, with its permutation
p-value against occlusion, and with --deletion the causal check: p(target) (with --contrast: sigmoid(F), p(target |
target or contrast)) as the words are masked in each method's order (tied tokens: averaged over their orders), its
area over the curve (AOPC) against 20 seeded random orders: beats, ties or is below the best of them.

An ELECTRA discriminator guesses no words: it explains its replaced-token logit at the token --position names.

Without --json: the guesses, F and p, a table (one row per token, one column per method, 4 significant digits),
the integrated-gradients check (its sum should equal F(x) - F(baseline); the delta is flagged when large), which
methods agree with occlusion, and with --deletion each method's AOPC. With --json: {"tokens", "mask_position",
"target", "contrast", "score", "probability", "methods": {method: one number per token}, "ig": {"steps", "score",
"baseline_score", "delta", "flagged"}, "agreement": {method: {method: rho or null}}, "agreement_p": {method: p
against occlusion or null}, "removable": n, "attention": {"layer", "head"}} and, with --deletion, "deletion":
{"positions", "curves", "aopc", "random_aopc", "beats_random", "verdict" (beats, ties, below or null), "follows",
"tied"}.

Progress goes to stderr, never stdout: a bar per stage on a terminal; elsewhere, once the run has taken 3 s, a line
as each stage starts and every 5 s within one."""


def add_parser(sub) -> None:
    attribute = sub.add_parser("attribute", help="which tokens made the model guess its word at a [MASK]: nine "
                                                 "attribution methods side by side, and do they agree?",
                               description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    attribute.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    attribute.add_argument("--target", help="the word to explain (default: the top guess); any single token of "
                                            "the vocabulary, typed as a word (mat, not Ġmat)")
    attribute.add_argument("--contrast", help="explain logit(target) - logit(contrast) instead: why the target "
                                              "rather than this word")
    attribute.add_argument("--mask", type=int, metavar="N", help="which [MASK] to explain when there are several, "
                                                                 "counted from 1 as people count (default: 1)")
    attribute.add_argument("--position", type=int, metavar="N",
                           help="ELECTRA discriminators only: the token whose replaced-token logit is explained, "
                                "counted as the table's first column ([CLS] is 0; default: the first word)")
    attribute.add_argument("--layer", type=int, default=-1, metavar="L",
                           help="the layer the attention column reads, from 0; negative counts from the last "
                                "(default: -1, the last)")
    attribute.add_argument("--head", type=int, metavar="H", help="the head the attention column reads, from 0 "
                                                                 "(default: the mean over heads)")
    attribute.add_argument("--deletion", action="store_true",
                           help="also run the deletion curves (the causal check): more forwards")
    attribute.add_argument("--top-k", type=int, default=5, metavar="K",
                           help="guesses listed above the table (default: 5)")
    attribute.add_argument("--device", default="auto", help="auto, cpu or cuda")
    attribute.add_argument("--json", action="store_true", help="print JSON instead of a table")
    attribute.add_argument("text", help='sentence with [MASK], e.g. "the cat sat on the [MASK] ."')
    attribute.add_argument("text_b", nargs="?", default=None, help="optional second sentence (segment B)")


def cmd_attribute(args) -> int:
    from bertviz_lab.views import inputs
    from bertviz_lab.views.why import explanation as vw

    if args.mask is not None and args.mask < 1:
        raise InputError(f"--mask counts the [MASK]s from 1 (the first is 1), got {args.mask}")
    ckpt = load(args)
    model, tokenizer = ckpt.model, ckpt.tokenizer
    discriminator = model.has_rtd and not model.has_mlm
    _check_options(args, discriminator)
    encoding = inputs.encode(tokenizer, model, args.text, args.text_b, allow_truncation=False)
    with Bar() as bar:
        result = vw.why(model, tokenizer, encoding, asked(args), progress=bar)
        deletion = vw.deletion_for(result, progress=bar) if args.deletion else None
    if args.json:
        print(json.dumps(vw.json_report(result, deletion), indent=2, ensure_ascii=False))
        return 0
    print("\n".join(report_lines(result, deletion)))
    return 0


def asked(args) -> Ask:
    """The Ask the options describe (--mask counts from 1, as people count; the Ask from 0)."""
    from bertviz_lab.views.why.ask import Ask

    return Ask(mask=(args.mask or 1) - 1, target=args.target, contrast=args.contrast, position=args.position,
               layer=args.layer, head=args.head, top_k=args.top_k)


def _check_options(args, discriminator: bool) -> None:
    """Options that do not apply to this model are errors, not silently ignored."""
    if discriminator:
        given = [f"--{name}" for name in ("target", "contrast", "mask") if getattr(args, name) is not None]
        if given:
            raise InputError(f"{given[0]} is for models that guess words: this ELECTRA discriminator only says "
                             "whether each token was replaced; pick the token to explain with --position")
    elif args.position is not None:
        raise InputError("--position is for ELECTRA discriminators: this model guesses the word at a [MASK]; "
                         "pick which [MASK] with --mask")


def report_lines(result, deletion=None) -> list[str]:
    """The readable report: what is explained, the table, the IG check, agreement, and the deletion check."""
    e, ig = result.explanation, result.explanation.ig
    verdict = ("FLAGGED: large against F(x) - F(baseline), the steps did not converge" if ig.flagged else
               "small against F(x) - F(baseline)")
    lines = [*_heading(result), *table(result), "",
             *_wrapped(f"integrated gradients: {ig.steps} steps, F(x) = {ig.score:#.4g}, F(baseline) = "
                       f"{ig.baseline_score:#.4g}, sum = {float(e.values['integrated_gradients'].sum()):#.4g}, "
                       f"delta = {ig.delta:.3g} ({verdict})"), "",
             *_wrapped(f"agreement (Spearman's rho over the word tokens): {result.agreement_sentence}")]
    p = printable(result.follows)
    return lines if deletion is None else [*lines, "", *deletion_lines(deletion, p)]


def deletion_lines(deletion, p: str = "p(target)") -> list[str]:
    """Each method's AOPC, the random orders' bar, and which methods cleared it (`p`: what the curves follow)."""
    from bertviz_lab.explain.checks import deletion_sentence
    from bertviz_lab.views.why.explanation import TITLES

    random, width = deletion.random_aopc, max(map(len, TITLES.values()))
    lines = _wrapped(f"deletion: AOPC, the mean drop of {p} as the words are masked in each method's order "
                     f"({len(random)} random orders: {random.mean():#.4g} ± {random.std():#.4g}, best "
                     f"{random.max():#.4g})")
    said = {"beats": "  beats every random order", "ties": "  ties the best random order"}
    lines += [f"  {TITLES[k]:<{width}} {v:#10.4g}{said.get(deletion.verdict(k), '')}" for k, v in deletion.aopc.items()]
    return [*lines, *_wrapped(deletion_sentence(deletion, TITLES, p))]


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, 116, break_on_hyphens=False)


def _heading(result) -> list[str]:
    e, at = result.explanation, result.position
    if result.guesses is None:  # the ELECTRA discriminator
        return [f"F = the replaced-token logit at token {at} ({printable(result.encoding.tokens[at])}) = "
                f"{e.value:#.4g}; p(replaced) = {e.prob:#.4g}"]
    guesses = ", ".join(f"{printable(c.token)} {c.prob:.4f}" for c in result.guesses.masks[0].candidates)
    n = result.masks.index(at) + 1
    target = printable(result.target)
    f = f"logit({target})" + (f" - logit({printable(result.contrast)})" if result.contrast is not None else "")
    head = "mean over heads" if e.head is None else f"head {e.head}"
    mask = printable(result.encoding.tokens[at])  # [MASK], or <mask> for RoBERTa
    return [f"{mask} #{n} of {len(result.masks)}, at token {at}; guesses: {guesses}",
            f"F = {f} = {e.value:#.4g}; p({target}) = {e.prob:#.4g}; attention column: layer {e.layer}, {head}"]


def table(result) -> list[str]:
    """One row per token, one column per method (named as the JSON names it), 4 significant digits."""
    values = result.explanation.values
    tokens = [printable(t) for t in result.encoding.tokens]
    width = min(max(map(len, tokens + ["token"])), 24)
    widths = {k: max(len(k), 10) for k in values}
    rows = ["", f"{'#':>3}  {'token':<{width}}" + "".join(f" {k:>{w}}" for k, w in widths.items())]
    for i, token in enumerate(tokens):
        mark = "*" if i == result.position else " "  # the explained position
        rows.append(f"{i:>3}{mark} {token[:width]:<{width}}" +
                    "".join(f" {values[k][i]:>#{w}.4g}" for k, w in widths.items()))
    rows.append("* the explained position")
    return rows


class Bar:
    """Every method's progress and the deletion curves' on stderr (stdout stays the report, or the JSON): a tqdm bar
    per stage on a terminal; elsewhere (a pipe, a log file), once the run has taken QUIET_S, a line as each stage
    starts and at most every EVERY_S within one ("attribute: attention flow 40% (12 s)")."""

    QUIET_S = 3.0  # a run shorter than this says nothing off a terminal
    EVERY_S = 5.0

    def __init__(self, command: str = "attribute") -> None:
        self.command = command  # the command the lines name: attribute, patch, neurons
        self.bar, self.label = None, None
        self.start, self.said = time.monotonic(), -math.inf

    def __call__(self, fraction: float, label: str) -> None:
        if not sys.stderr.isatty():
            self._line(fraction, label)
            return
        from tqdm import tqdm

        if label != self.label:  # each stage starts its own bar
            self.close()
            self.bar, self.label = tqdm(total=100, desc=label, file=sys.stderr, leave=False), label
        self.bar.update(round(100 * fraction) - self.bar.n)

    def _line(self, fraction: float, label: str) -> None:
        now = time.monotonic()
        if now - self.start < self.QUIET_S or (label == self.label and now - self.said < self.EVERY_S):
            return
        self.label, self.said = label, now
        print(f"{self.command}: {label} {fraction:.0%} ({now - self.start:.0f} s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


COMMANDS = {"attribute": cmd_attribute}
