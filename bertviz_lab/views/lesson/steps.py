"""The Lesson's steps, in the order the class meets them: one `Step` each (its id, its title, its paragraph and the
views function that computes the model's answer to its question). This list is the map of the Lesson; the renderer
that draws each step (Streamlit) is bound to its id in ui/lesson/steps.py.

A step is known everywhere by its id, never by its place in the list: the session's guess and revealed answer, its
Reveal button and the page link (`?step=softmax`). Adding a step is one entry here, its quiz function in a module
of views/lesson/ and its renderer in ui/lesson/steps.py; the list may be reordered without moving anyone's answers.
Links shared before steps had ids carry the step's number (`?step=4`): `LINKED_BY_NUMBER` keeps the order those
links knew, frozen, and `from_link` reads both kinds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bertviz_lab.views.lesson import head_steps as vlh
from bertviz_lab.views.lesson import neuron_step as vln
from bertviz_lab.views.lesson import patch_step as vlp
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import runs as lesson_runs
from bertviz_lab.views.lesson import vector_steps as vlv
from bertviz_lab.views.lesson import why_step as vlw


@dataclass(frozen=True)
class Step:
    id: str  # stable: the session, the Reveal button and links name the step by it; never renamed or reused
    title: str
    paragraph: str  # Markdown, under "About this step"
    quiz: Callable  # the views function whose Quiz the step asks (each takes the step's own inputs)


STEPS: tuple[Step, ...] = (
    Step("tokens", "Tokens",
         "BERT never reads letters. A tokenizer cuts the text into tokens from a fixed vocabulary (a word it does "
         "not have is split into pieces: BERT marks the later pieces ##, other models mark where a word starts), "
         "replaces each by its number in that vocabulary, its id, and frames the input with special tokens: BERT "
         "puts [CLS] first and [SEP] after each sentence, and other models write and place theirs their own way "
         "(the line below shows the active model's). [MASK] is a token too: the blank BERT will fill.",
         vl.tokens),
    Step("embeddings", "Embeddings",
         "Each id picks one row of the embedding matrix: a vector of numbers learned in pretraining. The model adds "
         "a vector for the token's position and, in most models, one for its segment (sentence A or B), and "
         "normalizes the sum; that is what layer 1 reads, after a projection to the layers' width where a model's "
         "embeddings have another width (the caption below says what the active model does). In a trained model, "
         "words used in similar ways tend to get rows pointing in similar directions, measured by cosine "
         "similarity: from −1 (opposite directions) through 0 (perpendicular) to 1 (the same direction).",
         vlv.embeddings),
    Step("heads", "Attention heads",
         "Each layer has several attention heads. In a head every token, as the query, gives each token of the "
         "input, as a key, a weight between 0 and 1; a query's weights add up to 1, and it takes that mix of the "
         "keys' information. Heads learn different jobs in pretraining: nobody tells them which.",
         vlh.previous_token),
    Step("softmax", "The softmax steps",
         "How a head gets its weights: the query's vector q meets every key's vector k in a dot product q·k, "
         "divided by √d_head to keep the scores moderate (d_head is the number of dimensions of q and k: the hidden "
         "size divided by the number of heads). The softmax then takes exp of each score and divides by the sum of "
         "them all, so the largest score gets the largest weight. The query's output is the weighted sum of the "
         "keys' value vectors.",
         vlh.strongest_key),
    Step("guess", "The guess at [MASK]",
         "After the last layer the MLM head turns the vector at [MASK] into one score (a logit) per token of the "
         "vocabulary, and a softmax turns the scores into probabilities. Unlike a left-to-right model, BERT uses "
         "the words on both sides of the blank.",
         vl.mask_guess),
    Step("why", "Which word mattered most?",
         "Which words did the guess rest on? Two ways to ask the model. Attention: where the last layer looked from "
         "the blank, its weights averaged over the heads. Occlusion: hide one word at a time under the blank's own "
         "token, run the model again, and see how far the guess's score (its logit) falls. Occlusion tests; "
         "attention only shows where the model looked, and the two need not agree.",
         vlw.word_that_mattered),
    Step("patching", "Where is the answer made?",
         "Occlusion says which input word matters; it cannot say where inside the model the answer is made. "
         "Activation patching can: run the sentence twice, once as it is (clean) and once with one word changed "
         "(corrupted: the subject in the other number), then rerun the corrupted sentence with one vector of the "
         "clean run put back, one layer and one position at a time, and measure how much of the clean answer comes "
         "back (the logit difference of the two verb forms, 0 for the corrupted run, 1 for the clean one). Each "
         "layer's output at each position is the residual stream: everything that position carries into the next "
         "layer. At the embeddings only the changed word differs between the runs, and the last layer is read at the "
         "[MASK] alone: somewhere between, the subject's number reaches the [MASK].",
         vlp.answer_path),
    Step("neurons", "Inside the feed-forward layer",
         "After its attention, each layer sends every token's vector alone through a feed-forward block: thousands "
         "of neurons, two thirds of BERT's weights. A neuron's input weights are a pattern it looks for (a key): "
         "its activation is large on the tokens that match it and near 0 elsewhere. Its output weights are what it "
         "adds to the token's vector when it fires (a value). Which tokens fire a neuron is found, not told: read "
         "the model over many sentences and keep each neuron's top contexts. This neuron is the active model's own, "
         "the one whose top contexts in the story world fire on one word most often.",
         vln.story_neuron),
    Step("loss", "The MLM loss",
         "In pretraining the hidden word is known, and BERT is scored on it: the loss at a masked position is "
         "−log p(true word). It is 0 when BERT gives the true word probability 1, ln V when it spreads its "
         "probability evenly over all V tokens, and more when it bets against the true word. The MLM loss is the "
         "mean over the masked positions, about 15% of the tokens.",
         vl.mask_loss),
    Step("nsp", "Next sentence prediction",
         "BERT's second pretraining task: it reads two sentences, [CLS] A [SEP] B [SEP], and says whether B is the "
         "sentence that came next (IsNext) or a random one (NotNext); half its training pairs were each. The "
         "[CLS] vector goes through the pooler and a two-way classifier; the loss is −log p(the right label).",
         vl.next_sentence),
    Step("training", "A short training run",
         "Now train a BERT yourselves: a tiny one, from random weights, on the lab's corpus of generated stories, "
         "with the loop the Pretrain page uses (15% of the tokens masked, the MLM and NSP losses, the AdamW "
         "optimizer). Before it has learned anything, how wrong is it?",
         lesson_runs.start_loss),
    Step("probe", "A linear probe",
         "Pretraining is half of BERT's recipe; the other half is fine-tuning: the whole network, every weight, "
         "trains further on a task with labels. This step does something simpler, a linear probe (the "
         "feature-based approach): the encoder stays frozen, and one linear layer learns the task from its vectors "
         "(here each input's last-layer vectors, averaged), so it measures what the vectors already hold. Does "
         "pretraining help, compared with the same network with random weights?",
         lesson_runs.probe_quiz),
    Step("contextual", "Contextual vectors",
         "Layer 0 is the embedding layer's output, what layer 1 reads; each layer after it computes a new vector "
         "for every token. Compare one word in three sentences, two in one sense and one in another, by cosine "
         "similarity within a layer: each layer has its own geometry, so cosines from different layers do not "
         "compare.",
         vlv.contextual),
)

# The order of the steps when a link named a step by its number: `?step=N` opens LINKED_BY_NUMBER[N - 1]. Frozen
# with the links already shared: never reorder or extend it (new links write the id).
LINKED_BY_NUMBER = ("tokens", "embeddings", "heads", "softmax", "guess", "why", "loss", "nsp", "training", "probe",
                    "contextual")


def ids() -> list[str]:
    """The steps' ids, in the order the class meets them."""
    return [step.id for step in STEPS]


def by_id(step_id: str) -> Step:
    """The step with this id; KeyError for an id no step has."""
    for step in STEPS:
        if step.id == step_id:
            return step
    raise KeyError(step_id)


def position(step_id: str) -> int:
    """Where the step stands in the Lesson now, from 1: what the picker and the heading show, never a key."""
    return ids().index(step_id) + 1


def from_link(value: str) -> str:
    """A link's `step` value -> the step's id: an id, or a number as links carried before ids (read in
    LINKED_BY_NUMBER's order); ValueError(why), the why completing a note such as "step=`12` is not ...". A step
    a link names by number that the Lesson no longer has is refused too."""
    value = value.strip()
    if re.fullmatch(r"\d{1,10}", value):
        if not 1 <= int(value) <= len(LINKED_BY_NUMBER):
            raise ValueError(f"is not a step's number (1 to {len(LINKED_BY_NUMBER)})")
        value = LINKED_BY_NUMBER[int(value) - 1]
    if value not in ids():
        raise ValueError("is not a step of the Lesson (one of " + ", ".join(ids()) + ")")
    return value
