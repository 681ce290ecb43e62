"""The session-state keys of the Syntax page's "Probing, carefully" tab (ui/syntax/probing.py), kept beside
ui/shell/state.py (which has no room left, as state_neurons.py) and read by ui/shell/links.py like theirs."""

from __future__ import annotations

from bertviz_lab.probing.records import TASKS
from bertviz_lab.ui.shell.state import Key
from bertviz_lab.ui.shell.state_checks import one_of

TAB = "Probing, carefully"  # the tab's label on the Syntax page


class Careful:
    """The task read by Control tasks and Description length, the amnesic probe's task and hidden state (None: the
    middle one, probing/amnesic.py's default_layer), and the two buttons. Tasks are TASKS' ids ("pos", "number")."""
    TASK = Key("syntax.careful.task", TASKS[0], one_of)
    AMNESIC_TASK = Key("syntax.careful.amnesic_task", "number", one_of)  # number: agreement says whether it is used
    AMNESIC_LAYER = Key("syntax.careful.amnesic_layer", None, one_of)  # a hidden state, 0 = the embeddings' output
    RUN, REMOVE = Key("syntax.careful.run"), Key("syntax.careful.remove")  # "Run the probes", "Remove it and measure"
    INPUTS = (TASK, AMNESIC_TASK, AMNESIC_LAYER)
    DEFAULTS = (TASK, AMNESIC_TASK)  # stored before any widget (`state.init`)
