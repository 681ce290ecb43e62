"""Lesson: a class walks through how BERT works in eleven steps, from tokens to contextual vectors.

Each step is one short paragraph, a question the class answers before it sees anything (predict, then
reveal), and the live view the Reveal unlocks: every number computed from the active model on the
lesson's sentences, which the teacher can edit. Back / Next or the step picker move through the steps;
the score counts the revealed answers.
"""

import streamlit as st

from bertviz_lab.ui.shell import projector
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.lesson.stepper import Frame, header, nav, shown_errors
from bertviz_lab.ui.lesson.steps import STEPS
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.ui.kit.widgets import family_note
from bertviz_lab.views.lesson.questions import STEPS as TITLES

INTRO = (
    # 1. Tokens
    "BERT never reads letters. A tokenizer cuts the text into tokens from a fixed vocabulary (a word it does "
    "not have is split into pieces: BERT marks the later pieces ##, other models mark where a word starts), "
    "replaces each by its number in that vocabulary, its id, and frames the input with special tokens: BERT puts "
    "[CLS] first and [SEP] after each sentence, and other models write and place theirs their own way (the line "
    "below shows the active model's). [MASK] is a token too: the blank BERT will fill.",
    # 2. Embeddings
    "Each id picks one row of the embedding matrix: a vector of numbers learned in pretraining. The model adds a "
    "vector for the token's position and, in most models, one for its segment (sentence A or B), and normalizes "
    "the sum; that is what layer 1 reads, after a projection to the layers' width where a model's embeddings "
    "have another width (the caption below says what the active model does). In a trained model, words used in "
    "similar ways tend to get rows pointing in similar directions, measured by cosine similarity: from −1 "
    "(opposite directions) through 0 (perpendicular) to 1 (the same direction).",
    # 3. Attention heads
    "Each layer has several attention heads. In a head every token, as the query, gives each token of the "
    "input, as a key, a weight between 0 and 1; a query's weights add up to 1, and it takes that mix of the "
    "keys' information. Heads learn different jobs in pretraining: nobody tells them which.",
    # 4. The softmax steps
    "How a head gets its weights: the query's vector q meets every key's vector k in a dot product q·k, "
    "divided by √d_head to keep the scores moderate (d_head is the number of dimensions of q and k: the hidden "
    "size divided by the number of heads). The softmax then takes exp of each score and divides by the sum of "
    "them all, so the largest score gets the largest weight. The query's output is the weighted sum of the "
    "keys' value vectors.",
    # 5. The guess at [MASK]
    "After the last layer the MLM head turns the vector at [MASK] into one score (a logit) per token of the "
    "vocabulary, and a softmax turns the scores into probabilities. Unlike a left-to-right model, BERT uses the "
    "words on both sides of the blank.",
    # 6. Which word mattered most?
    "Which words did the guess rest on? Two ways to ask the model. Attention: where the last layer looked from the "
    "blank, its weights averaged over the heads. Occlusion: hide one word at a time under the blank's own token, "
    "run the model again, and see how far the guess's score (its logit) falls. Occlusion tests; attention only "
    "shows where the model looked, and the two need not agree.",
    # 7. The MLM loss
    "In pretraining the hidden word is known, and BERT is scored on it: the loss at a masked position is "
    "−log p(true word). It is 0 when BERT gives the true word probability 1, ln V when it spreads its "
    "probability evenly over all V tokens, and more when it bets against the true word. The MLM loss is the mean "
    "over the masked positions, about 15% of the tokens.",
    # 8. Next sentence prediction
    "BERT's second pretraining task: it reads two sentences, [CLS] A [SEP] B [SEP], and says whether B is the "
    "sentence that came next (IsNext) or a random one (NotNext); half its training pairs were each. The "
    "[CLS] vector goes through the pooler and a two-way classifier; the loss is −log p(the right label).",
    # 9. A short training run
    "Now train a BERT yourselves: a tiny one, from random weights, on the lab's corpus of generated stories, "
    "with the loop the Pretrain page uses (15% of the tokens masked, the MLM and NSP losses, the AdamW "
    "optimizer). Before it has learned anything, how wrong is it?",
    # 10. A linear probe
    "Pretraining is half of BERT's recipe; the other half is fine-tuning: the whole network, every weight, "
    "trains further on a task with labels. This step does something simpler, a linear probe (the feature-based "
    "approach): the encoder stays frozen, and one linear layer learns the task from its vectors (here each "
    "input's last-layer vectors, averaged), so it measures what the vectors already hold. Does pretraining "
    "help, compared with the same network with random weights?",
    # 11. Contextual vectors
    "Layer 0 is the embedding layer's output, what layer 1 reads; each layer after it computes a new vector for "
    "every token. Compare one word in three sentences, two in one sense and one in another, by cosine similarity "
    "within a layer: each layer has its own geometry, so cosines from different layers do not compare.",
)

if not projector.on():  # projector view: the top bar names the page, and every line counts at 1024 x 768
    st.title("Lesson: how BERT works")
    st.caption("Eleven steps through BERT, each with a question to answer before the model shows its own answer, "
               "computed live from the active model.")
ckpt = active_model()
family_note(ckpt)
step = header()
left, right = st.columns([3, 2], gap="medium")  # the question on the right, on the first screen
if not projector.on():  # projector view: the step picker above names the step
    left.subheader(f"{step}. {TITLES[step - 1]}")
lead = left.container()
read = left.expander("About this step", expanded=step not in state.get(K.ANSWERS), icon=":material/menu_book:")
read.markdown(INTRO[step - 1])
frame = Frame(lead, left.container(), right.container(), right.container(horizontal=True), st.container())
with frame.ask, shown_errors():  # bad input or a missing head: a sentence saying so, and the lesson goes on
    STEPS[step - 1](ckpt, frame)
nav(frame.bar)
