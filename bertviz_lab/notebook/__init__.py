"""The lab in a notebook (Jupyter, Colab, VS Code): one call per view of the app, each returning the plotly figure
the app's page draws, from the same view and figure builder, so it renders inline and its numbers are the page's.

    from bertviz_lab import notebook as nb
    lab = nb.load("bertviz-mini")                    # a shipped model's name, a folder, a Hub id, or
    lab = nb.load(model, tokenizer)                  # a transformers model and tokenizer already in memory
    nb.predict(lab, "the cat sat on the [MASK] .")   # Mask & predict
    nb.attention(lab, "the animal was tired because it ran .", layer=0, head=0)
    nb.patch(lab, "the keys [MASK] here .", "the key [MASK] here .")   # Where is the answer made?
    nb.neurons(lab, "she ate the [MASK] .", layer=3, neuron=17)         # Inside the feed-forward layer
    nb.probe(lab, "number", amnesic_layer=2)                            # What a probe can and cannot show

Every call takes, in place of `lab`, anything `load` takes by name (`nb.predict("bertviz-mini", ...)`); a model
opened by name is loaded once. Layers, heads, tokens and masks count from 0, as in the code. A mistake in the
input (empty text, too long a text, a layer the model lacks, a model without a masked-LM head) is a `LabError`
(bertviz_lab.errors) whose message is one sentence. Each docstring says what its figure shows and how far it can be
trusted: a weight is not an explanation, and one sentence is not evidence.
"""

from bertviz_lab.notebook.attention_calls import attention, head_roles, layer_steps, softmax_steps
from bertviz_lab.notebook.lab import Lab, load
from bertviz_lab.notebook.grammar import syntax
from bertviz_lab.notebook.explanations import deletion, why
from bertviz_lab.notebook.neurons import neurons
from bertviz_lab.notebook.patching import patch
from bertviz_lab.notebook.probing import probe
from bertviz_lab.notebook.words import logit_lens, predict, same_word

__all__ = ["Lab", "attention", "deletion", "head_roles", "layer_steps", "load", "logit_lens", "neurons", "patch",
           "predict", "probe", "same_word", "softmax_steps", "syntax", "why"]
