"""Why this guess? The page's answer in a notebook: every attribution method's value per token (the heat strips),
how far the methods agree, and the causal check that tests them (the deletion curves). One explanation per guess
asked about is kept on the Lab, so the strips at another layer, the agreement and the deletion curves reuse it."""

from __future__ import annotations

import numbers

import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.explain import checks
from bertviz_lab.explain.methods import IG_STEPS
from bertviz_lab.figures import why as fy
from bertviz_lab.notebook.lab import Bar, Lab, choice, encode, index, lab_of, needs_mlm, whole
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why.ask import Ask

KINDS = ("strips", "agreement")
ASKED = ("mask", "target", "contrast", "position", "layer", "head", "ig_steps")  # the keywords of `ask`, Ask's


def why(lab, text: str, text_b: str | None = None, *, kind: str = "strips", **ask) -> go.Figure:
    """Which tokens made the model guess what it guessed at a [MASK]: nine methods side by side.

    `ask`, the guess asked about, as keywords: mask=0, target=None, contrast=None, position=None, layer=-1,
    head=None, ig_steps=50. Four methods explain one number, F: the `target` word's logit at the `mask`-th [MASK]
    (from 0; default target: the top guess), minus the `contrast` word's when one is given ("why mat rather than
    rug?"). For an ELECTRA discriminator F is its replaced-token logit at token `position` (default: the first word).

    kind "strips": one row per method, token by token, each coloured against its own largest value (every method
    has its own units); signed rows: blue raises F, red lowers it. The attention rows (attention at `layer`, from
    0, -1 the last; `head`, None the mean over heads; rollout, flow, value-weighted norm) say where the [MASK]
    looked, a clue to test, and never read F: they are the same for any target or contrast; so is value zeroing
    (each token's value vectors zeroed in a layer, how far the layer's outputs move, rolled out through the
    layers: Mohebbi et al. 2023), read from how the layers mix the tokens; the score rows
    (gradient, gradient × input, integrated gradients with `ig_steps` steps, occlusion: one token masked at a time)
    are computed from F itself. Neither kind is right
    by definition: `deletion` tests them. kind "agreement": Spearman's ρ of every pair of methods over the n tokens
    that can be removed (the title gives n; over few tokens a large ρ is often chance).
    One sentence is an example, not evidence: try several before trusting a method.
    """
    ask = _known(ask, "why")
    result = _explained(lab_of(lab), text, text_b, ask)
    e = result.explanation
    if choice(kind, KINDS, "kind") == "agreement":
        return fy.agreement(vw.titled(result.agreement), len(e.movable))
    return fy.strips(vw.titled(e.values), vw.SIGNED, e.tokens, e.layer, e.head)


def deletion(lab, text: str, text_b: str | None = None, *, random_orders: int = checks.RANDOM_ORDERS,
             seed: int = checks.RANDOM_SEED, **ask) -> go.Figure:
    """The causal check of `why` (the same `ask` keywords): mask the tokens one at a time in the order each method
    ranks them, most important first, and draw p(target) after each removal (with a `contrast`: sigmoid(F) =
    p(target | target or contrast), which follows F; a discriminator: p(replaced)). Tokens a method ties are
    averaged over their orders.

    A method that found what the score rests on makes it fall faster than `random_orders` random orders do (the
    grey band: their mean ± 1 standard deviation; `seed` draws them); dashed lines are the methods that
    never read F (attention's and value zeroing). Masking a token also takes the text out of the distribution the model was trained on, so a fall
    measures the token and the damage together; and one sentence's curves are one example, not a verdict on a
    method.
    """
    ask = _known(ask, "deletion")
    lab = lab_of(lab)
    random_orders, seed = whole(random_orders, 1, 1_000, "random_orders"), whole(seed, 0, 2**32 - 1, "seed")
    result = _explained(lab, text, text_b, ask)
    e = result.explanation
    key = ("deletion", tuple(result.encoding.ids), tuple(result.encoding.segment_ids), result.position,
           result.target, result.contrast, e.ig.steps, e.layer, e.head, random_orders, seed)

    def run():
        with Bar() as bar:
            return vw.deletion_for(result, random_orders=random_orders, seed=seed, progress=bar.fraction)

    found = lab.remember(key, run)
    return fy.deletion(vw.titled(found.curves), found.random_curves, vw.NEVER_F, result.follows)


def _known(ask: dict, call: str) -> dict:
    """`ask`, the keywords given, once each is known to be one of ASKED (as Python says of any other keyword)."""
    for name in ask:
        if name not in ASKED:
            raise TypeError(f"{call}() got an unexpected keyword argument '{name}'")
    return ask


def _asked(lab: Lab, encoding, given: dict) -> Ask:
    """The Ask the keywords `given` describe: what depends on this model (its layers, heads, the text's masks)
    checked in the notebook's words; Ask checks the rest (words as text) when it is built."""
    options = {"mask": 0, "target": None, "contrast": None, "position": None, "layer": -1, "head": None,
               "ig_steps": IG_STEPS, **given}
    discriminator = lab.model.has_rtd and not lab.model.has_mlm
    if not discriminator:
        needs_mlm(lab, "makes no guess to explain")
    if discriminator and (options["mask"] != 0 or options["target"] is not None or options["contrast"] is not None):
        raise InputError("mask, target and contrast are for models that guess words: this ELECTRA discriminator "
                         "only says whether each token was replaced; pick the token to explain with position")
    if options["position"] is not None and not discriminator:
        raise InputError("position is for ELECTRA discriminators: this model guesses the word at a [MASK]; pick "
                         "which [MASK] with mask")
    masks = sum(i == lab.tokenizer.mask_id for i in encoding.ids)
    mask = options["mask"]
    if masks and not discriminator:
        mask = index(mask, masks, "mask", owner="the text")
    elif not masks:
        mask = 0  # no [MASK] at all: vw.why says what to type
    ig_steps = whole(options["ig_steps"], 1, 10_000, "ig_steps")
    L, H = lab.config.num_hidden_layers, lab.config.num_attention_heads
    layer = options["layer"]
    number = whole(layer, -L, L - 1, "layer") if not isinstance(layer, bool) and isinstance(layer, numbers.Integral) \
        else layer
    layer = index(number % L if isinstance(number, int) and not isinstance(number, bool) else number, L, "layer")
    head = None if options["head"] is None else index(options["head"], H, "head")
    return Ask(mask, options["target"], options["contrast"], options["position"], layer, head, ig_steps=ig_steps)


def _explained(lab: Lab, text, text_b, given: dict) -> vw.Why:
    """The explanation of the guess asked about (kept on the Lab), its attention strip at the layer and head asked."""
    encoding = encode(lab, text, text_b)
    ask = _asked(lab, encoding, given)
    key = ("why", tuple(encoding.ids), tuple(encoding.segment_ids), ask.explained)

    def run() -> vw.Why:
        with Bar() as bar:
            return vw.why(lab.model, lab.tokenizer, encoding, ask.explained, progress=bar.fraction)

    return vw.with_attention(lab.remember(key, run), ask.layer, ask.head)
