"""Why this guess? The page's answer in a notebook: every attribution method's value per token (the heat strips),
how far the methods agree, and the causal check that tests them (the deletion curves). One explanation per guess
asked about is kept on the Lab, so the strips at another layer, the agreement and the deletion curves reuse it."""

from __future__ import annotations

import html
import numbers

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.explain import checks
from bertviz_lab.explain.methods import IG_STEPS
from bertviz_lab.explain.report import METHODS
from bertviz_lab.figures import token_labels
from bertviz_lab.figures import why as fy
from bertviz_lab.notebook.lab import Bar, Lab, choice, encode, index, lab_of, needs_mlm, whole
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why import parts as why_parts

KINDS = ("strips", "agreement")


def why(lab, text: str, text_b: str | None = None, *, mask: int = 0, target: str | None = None,
        contrast: str | None = None, position: int | None = None, layer: int = -1, head: int | None = None,
        kind: str = "strips", ig_steps: int = IG_STEPS) -> go.Figure:
    """Which tokens made the model guess what it guessed at a [MASK]: eight methods side by side.

    Four methods explain one number, F: the `target` word's logit at the `mask`-th [MASK] (from 0; default target:
    the top guess), minus the `contrast` word's when one is given ("why mat rather than rug?"). For an ELECTRA
    discriminator F is its replaced-token logit at token `position` (default: the first word).

    kind "strips": one row per method, token by token, each coloured against its own largest value (every method
    has its own units); signed rows: blue raises F, red lowers it. The attention rows (attention at `layer`, from
    0, -1 the last; `head`, None the mean over heads; rollout, flow, value-weighted norm) say where the [MASK]
    looked, a clue to test, and never read F: they are the same for any target or contrast; the score rows (gradient, gradient × input, integrated gradients
    with `ig_steps` steps, occlusion: one token masked at a time) are computed from F itself. Neither kind is right
    by definition: `deletion` tests them. kind "agreement": Spearman's ρ of every pair of methods over the n tokens
    that can be removed (the title gives n; over few tokens a large ρ is often chance).
    One sentence is an example, not evidence: try several before trusting a method.
    """
    lab = lab_of(lab)
    result = _explained(lab, text, text_b, mask, target, contrast, position, ig_steps, layer, head)
    if choice(kind, KINDS, "kind") == "agreement":
        rho = np.array([[np.nan if r is None else r for r in row.values()] for row in result.agreement.values()])
        return fy.agreement_matrix(rho, [vw.TITLES[k] for k in result.agreement], "Do the methods rank the tokens "
                                     f"alike? Spearman ρ over {len(result.explanation.movable)} tokens")
    e = result.explanation
    looked = f"attention at layer {e.layer}, " + ("mean over heads" if e.head is None else f"head {e.head}")
    return fy.heat_strips({vw.TITLES[k]: v for k, v in e.values.items()},
                            {vw.TITLES[k]: METHODS[k].signed for k in METHODS}, token_labels(e.tokens),
                            f"Each method's answer, token by token ({looked})")


def deletion(lab, text: str, text_b: str | None = None, *, mask: int = 0, target: str | None = None,
             contrast: str | None = None, position: int | None = None, layer: int = -1, head: int | None = None,
             random_orders: int = checks.RANDOM_ORDERS, seed: int = checks.RANDOM_SEED,
             ig_steps: int = IG_STEPS) -> go.Figure:
    """The causal check of `why` (same arguments): mask the tokens one at a time in the order each method ranks
    them, most important first, and draw p(target) after each removal (with a `contrast`: sigmoid(F) = p(target |
    target or contrast), which follows F; a discriminator: p(replaced)). Tokens a method ties are averaged over
    their orders.

    A method that found what the score rests on makes it fall faster than `random_orders` random orders do (the
    grey band: their mean ± 1 standard deviation; `seed` draws them); dashed lines are the methods read from
    attention. Masking a token also takes the text out of the distribution the model was trained on, so a fall
    measures the token and the damage together; and one sentence's curves are one example, not a verdict on a
    method.
    """
    lab = lab_of(lab)
    random_orders, seed = whole(random_orders, 1, 1_000, "random_orders"), whole(seed, 0, 2**32 - 1, "seed")
    result = _explained(lab, text, text_b, mask, target, contrast, position, ig_steps, layer, head)
    e = result.explanation
    key = ("deletion", tuple(result.encoding.ids), tuple(result.encoding.segment_ids), result.position,
           result.target, result.contrast, ig_steps, e.layer, e.head, random_orders, seed)

    def run():
        with Bar() as bar:
            return vw.deletion_for(result, random_orders=random_orders, seed=seed, progress=bar.fraction)

    found = lab.remember(key, run)
    p = html.escape(result.follows)  # plotly reads HTML
    return fy.deletion_curves({vw.TITLES[k]: c for k, c in found.curves.items()}, found.random_curves,
                                {vw.TITLES[k] for k, m in METHODS.items() if m.kind == "attention"}, p,
                                f"{p} after each removal, in each method's order")


def _explained(lab: Lab, text, text_b, mask, target, contrast, position, ig_steps, layer, head) -> vw.Why:
    """The explanation of the guess asked about (kept on the Lab), its attention strip at `layer` and `head`."""
    model, tokenizer = lab.model, lab.tokenizer
    encoding = encode(lab, text, text_b)
    discriminator = model.has_rtd and not model.has_mlm
    if not discriminator:
        needs_mlm(lab, "makes no guess to explain")
    if discriminator and (mask != 0 or target is not None or contrast is not None):
        raise InputError("mask, target and contrast are for models that guess words: this ELECTRA discriminator "
                         "only says whether each token was replaced; pick the token to explain with position")
    if position is not None and not discriminator:
        raise InputError("position is for ELECTRA discriminators: this model guesses the word at a [MASK]; pick "
                         "which [MASK] with mask")
    masks = sum(i == tokenizer.mask_id for i in encoding.ids)
    if masks and not discriminator:  # no [MASK] at all: vw.why says what to type
        mask = index(mask, masks, "mask", owner="the text")
    ig_steps = whole(ig_steps, 1, 10_000, "ig_steps")
    for word, what in ((target, "target"), (contrast, "contrast")):
        if word is not None and not isinstance(word, str):
            raise InputError(f"the {what} must be a word (text), not {type(word).__name__}")
    L, H = lab.config.num_hidden_layers, lab.config.num_attention_heads
    number = whole(layer, -L, L - 1, "layer") if not isinstance(layer, bool) and isinstance(layer, numbers.Integral) \
        else layer
    layer = index(number % L if isinstance(number, int) and not isinstance(number, bool) else number, L, "layer")
    head = None if head is None else index(head, H, "head")
    key = ("why", tuple(encoding.ids), tuple(encoding.segment_ids), mask, target, contrast, position, ig_steps)

    def run() -> vw.Why:
        with Bar() as bar:
            return vw.why(model, tokenizer, encoding, mask=mask, target=target, contrast=contrast,
                          position=position, ig_steps=ig_steps, progress=bar.fraction)

    return why_parts.with_attention(lab.remember(key, run), layer, head)
