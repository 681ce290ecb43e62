"""The session-state keys of "Inside the feed-forward layer" (pages/neurons.py, ui/neurons/), kept beside
ui/shell/state.py (which has no room left, as state_patching.py) and read by ui/shell/links.py like theirs."""

from __future__ import annotations

from bertviz_lab.ui.shell.state import Key
from bertviz_lab.ui.shell.state_checks import one_of
from bertviz_lab.views.neurons.ask import FACTORS, TOP_K

DEFAULT_TEXT = "the children in the park [MASK] happy ."  # agreement across "park": were (plural) or was
# The page's sections, one tab each, in the order a class meets them; only the open one computes.
SECTIONS = ("One sentence", "One neuron", "Neurons behind the guess", "Outlier dimensions")
CORPORA = {"story": "The story world (2,000 sentences)", "own": "Your sentences", "upload": "A .txt file"}


class Neurons:
    """The sentence, the open section, the layer, token and neuron looked at (0-based; None: the page's default,
    known only once the model and the sentence are: the last layer, the first [MASK], the most active neuron at the
    token), the factors, the corpus of the top contexts, and the guess the neurons are asked about."""
    TEXT = Key("neurons.text", DEFAULT_TEXT)
    SECTION = Key("neurons.section", None, one_of)  # the open tab, by its label; None: the first
    LAYER = Key("neurons.layer", None, one_of)  # shared by One sentence and One neuron
    TOKEN = Key("neurons.token", None, one_of)  # a token position
    NEURON = Key("neurons.neuron")  # no check: a neuron the layer lacks is said in one sentence, not dropped
    FACTORS = Key("neurons.factors", FACTORS)
    CORPUS = Key("neurons.corpus", "story", one_of)  # one of CORPORA
    OWN = Key("neurons.own", "")  # the learner's sentences, one a line
    UPLOAD = Key("neurons.upload")  # the uploaded .txt (a file, never in a link)
    ANSWER, FOIL = Key("neurons.answer", ""), Key("neurons.foil", "")  # "": the top guess; no foil
    METHOD = Key("neurons.method", "ig", one_of)  # one of views.neurons.ask.METHODS
    K = Key("neurons.k", TOP_K)  # the top neurons suppressed by the causal test
    NIU = Key("neurons.niu", False)  # the "Grammar vs word knowledge" expander is open
    LOSS = Key("neurons.loss")  # the "Run the loss test" button
    INPUTS = (TEXT, SECTION, LAYER, TOKEN, NEURON, FACTORS, CORPUS, OWN, ANSWER, FOIL, METHOD, K)
    DEFAULTS = (TEXT, FACTORS, CORPUS, OWN, ANSWER, FOIL, METHOD, K)  # stored before any widget (`state.init`)

