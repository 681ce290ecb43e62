"""Lesson: a class walks through how BERT works in ten steps, from tokens to contextual vectors.

Each step is one short paragraph, a question the class answers before it sees anything (predict, then
reveal), and the live view the Reveal unlocks: every number computed from the active model on the
lesson's sentences, which the teacher can edit. Back / Next or the step picker move through the steps;
the score counts the revealed answers.
"""

import streamlit as st

from bertviz_lab.ui.lesson import score_bar, shown_errors, stepper
from bertviz_lab.ui.lesson_steps import STEPS
from bertviz_lab.ui.models import active_model
from bertviz_lab.ui.widgets import family_note
from bertviz_lab.views.lesson import STEPS as TITLES

INTRO = (
    # 1. Tokens
    "BERT never reads letters. A tokenizer cuts the text into tokens from a fixed vocabulary (a word it does "
    "not have is split into pieces, the later ones marked ##), replaces each by its number in that vocabulary, "
    "its id, and frames the input: [CLS] first, [SEP] after each sentence. [MASK] is a token too: the blank "
    "BERT will fill.",
    # 2. Embeddings
    "Each id picks one row of the embedding matrix: a vector of numbers learned in pretraining. BERT adds a "
    "position embedding (where the token stands) and a segment embedding (sentence A or B) and normalizes the "
    "sum: that is what layer 1 reads. Words used in similar ways end up with rows pointing in similar "
    "directions, measured by cosine similarity: 1 for the same direction, 0 for unrelated ones.",
    # 3. Attention heads
    "Each layer has several attention heads. In a head every token, as the query, gives each token of the "
    "input, as a key, a weight between 0 and 1; a query's weights add up to 1, and it takes that mix of the "
    "keys' information. Heads learn different jobs in pretraining: nobody tells them which.",
    # 4. The softmax steps
    "How a head gets its weights: the query's vector q meets every key's vector k in a dot product q·k, "
    "divided by √d_head (the length of these vectors) to keep the scores moderate. The softmax then takes exp "
    "of each score and divides by the sum of them all, so the largest score gets the largest weight. The "
    "query's output is the weighted sum of the keys' value vectors.",
    # 5. The guess at [MASK]
    "After the last layer the MLM head turns the vector at [MASK] into one score (a logit) per token of the "
    "vocabulary, and a softmax turns the scores into probabilities. Unlike a left-to-right model, BERT uses the "
    "words on both sides of the blank.",
    # 6. The MLM loss
    "In pretraining the hidden word is known, and BERT is scored on it: the loss at a masked position is "
    "−log p(true word). It is 0 when BERT gives the true word probability 1, ln V when it spreads its "
    "probability evenly over all V tokens, and more when it bets against the true word. The MLM loss is the mean "
    "over the masked positions, about 15% of the tokens.",
    # 7. Next sentence prediction
    "BERT's second pretraining task: it reads two sentences, [CLS] A [SEP] B [SEP], and says whether B is the "
    "sentence that came next (IsNext) or a random one (NotNext); half its training pairs were each. The "
    "[CLS] vector goes through the pooler and a two-way classifier; the loss is −log p(the right label).",
    # 8. A short training run
    "Now train a BERT yourselves: a tiny one, from random weights, on the lab's corpus of generated stories, "
    "with the loop the Pretrain page uses (15% of the tokens masked, the MLM and NSP losses, the AdamW "
    "optimizer). Before it has learned anything, how wrong is it?",
    # 9. Fine-tuning
    "Pretraining is half of BERT's recipe; the other half is fine-tuning on a task with labels. The cheapest "
    "kind, a linear probe, keeps the encoder frozen and trains one linear layer on its vectors (here each "
    "input's last-layer vectors, averaged). Does pretraining help, compared with the same network with random "
    "weights?",
    # 10. Contextual vectors
    "An embedding row gives “bank” one vector, whatever the sentence. BERT's layers mix in the context, so "
    "the same word leaves each layer with a different vector in each sentence. Compare one word's vectors in "
    "two sentences, layer by layer (layer 0: the embeddings), by cosine similarity.",
)

st.title("Lesson: how BERT works")
st.caption("Ten steps through BERT, each with a question to answer before the model shows its own answer, "
           "computed live from the active model.")
ckpt = active_model()
family_note(ckpt)
step = stepper()
score_bar()
st.subheader(f"{step}. {TITLES[step - 1]}")
st.markdown(INTRO[step - 1])
with shown_errors():  # bad input or a missing head: a sentence saying so, and the lesson goes on
    STEPS[step - 1](ckpt)
