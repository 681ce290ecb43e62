"""The session-state keys of "Where is the answer made?" (pages/patching.py, ui/patching/), kept beside
ui/shell/state.py (which holds every other page's and has no room left) and read by ui/shell/links.py like theirs."""

from __future__ import annotations

from bertviz_lab.corpus.minimal_pairs import by_key
from bertviz_lab.ui.shell.state import Key
from bertviz_lab.ui.shell.state_checks import one_of, some_of
from bertviz_lab.views.patching.ask import DRAWS

DEFAULT_PAIR = by_key("agreement-1")  # "the children in the park [MASK] happy ." / "the child ...": were - was
# The grids the page offers, by what they patch: the residual stream, the attention and feed-forward blocks (two
# grids), the heads, one head's query, key and value (ui/patching/sections.py names them).
VIEWS = ("resid", "blocks", "heads", "qkv")


class Patch:
    """The two runs (typed, picked among the built-in pairs, or noise on chosen tokens), the answer and the foil,
    and the grid shown: which, in which direction, and for the query/key/value grid its layer and head (0-based)."""
    PAIR = Key("patch.pair", DEFAULT_PAIR.key, one_of)  # the built-in pair picked last (its key); None: none
    CLEAN, CORRUPT = Key("patch.clean", DEFAULT_PAIR.clean), Key("patch.corrupt", DEFAULT_PAIR.corrupt)
    ANSWER, FOIL = Key("patch.answer", DEFAULT_PAIR.answer), Key("patch.foil", DEFAULT_PAIR.foil)  # "": defaults
    NOISE = Key("patch.noise", False)  # corrupt by noise on the clean sentence's chosen tokens instead
    NOISED = Key("patch.noised", (), some_of)  # the token positions noised
    DRAWS, SEED = Key("patch.draws", DRAWS), Key("patch.seed", 0)
    GRID = Key("patch.grid", VIEWS[0], one_of)  # one of VIEWS
    DIRECTION = Key("patch.direction", "denoise", one_of)  # explain/patch_grids.py's DIRECTIONS
    LAYER, HEAD = Key("patch.layer", 0, one_of), Key("patch.head", 0, one_of)  # the query/key/value grid's head
    INPUTS = (CLEAN, CORRUPT, ANSWER, FOIL, NOISE, NOISED, DRAWS, SEED, GRID, DIRECTION, LAYER, HEAD)
