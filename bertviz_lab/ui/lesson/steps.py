"""The Lesson page's renderers, one a step, each bound to its step's id (`RENDERERS`, filled by `@renders("id")`;
the steps, their order, titles and paragraphs are views/lesson/steps.py's list): the inputs the step reads, what
can be shown before the guess, the question (ui/lesson/stepper.py's `ask`), and the live view the Reveal unlocks.

Every renderer takes the active model's checkpoint; every number comes from views/ (views/lesson/, over attention,
predict, explain, patching, neurons, neighbours and representations) and every chart from figures/.
Bad input and missing heads raise InputError, which the page shows as a sentence (`ui_lesson.shown_errors`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.figures.attention import attention_grid, softmax_bars
from bertviz_lab.figures.lesson import answer_bars, grid_is_compact, labelled_grid
from bertviz_lab.figures.losses import topk_grid
from bertviz_lab.figures.patching import columns, grid_heatmap
from bertviz_lab.figures.predictions import prediction_bars
from bertviz_lab.figures.representations import sense_lines
from bertviz_lab.finetune import tasks
from bertviz_lab.head_id import HeadId
from bertviz_lab.ui.attention import cached as ui_attention
from bertviz_lab.ui.lesson import stepper as ui_lesson
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import ModelKey, model_key
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.ui.kit.tables import by_position, number, numbers
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import head_steps as vlh
from bertviz_lab.views.lesson import neuron_step as vln
from bertviz_lab.views.lesson import patch_step as vlp
from bertviz_lab.views.lesson import runs as lesson_runs
from bertviz_lab.views.lesson import steps as vls
from bertviz_lab.views.lesson import vector_steps as vlv
from bertviz_lab.views.lesson import why_step as vlw
from bertviz_lab.ui.why import sections as ui_why
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.representations import vectors as rv

MASKED_LABEL = "The lesson's sentence (with [MASK] where BERT should guess a word)"
ATTENTION_LABEL = "The attention sentence"
Renderer = Callable[[Checkpoint, ui_lesson.Frame], None]
RENDERERS: dict[str, Renderer] = {}  # step id -> how the step draws; a test checks that every step has one


def renders(step_id: str) -> Callable[[Renderer], Renderer]:
    """Bind the renderer below to the step with this id (a KeyError for an id the list lacks, a ValueError for a
    step bound twice)."""
    vls.by_id(step_id)

    def bind(draw: Renderer) -> Renderer:
        if step_id in RENDERERS:
            raise ValueError(f"step {step_id!r} has two renderers")
        RENDERERS[step_id] = draw
        return draw
    return bind


@renders("tokens")
def tokens(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        st.caption(vl.framing_note(ckpt.tokenizer))
        text = ui_lesson.sentence(K.MASKED, MASKED_LABEL)
    encoding = ui_lesson.encode(ckpt, text)
    quiz = vl.tokens(encoding)
    if ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text), lambda: quiz):
        for piece in by_position(vl.token_rows(encoding)):  # a few positions a row: no table wider than the page
            frame.below.dataframe(piece)


@renders("embeddings")
def embeddings(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        text = ui_lesson.sentence(K.MASKED, MASKED_LABEL)
        words = vlv.askable_words(ui_lesson.encode(ckpt, text), ckpt.tokenizer)
        if not words:
            st.info("The sentence has no word of the story world's lists (pets, farm animals, foods, places…) "
                    f"that this model reads as one token and that has at least {vlv.OPTIONS} more words of its kind, "
                    "each one token too: type another.")
            return
        word = ui_lesson.choice(K.WORD, "Word to look up", words, vlv.content_word(words), format_func=vlv.shown)
        config = ckpt.config
        st.caption(f"This model's embedding matrix: {config.vocab_size:,} rows (one per token) of "
                   f"{config.embedding_width} numbers. {rv.embedding_layer(config)}")
    quiz, options, nearest = ui_lesson.computed(ckpt, vlv.embeddings, word)
    if answered := ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text, word), lambda: quiz):
        with frame.below:
            chart(answer_bars(options["token"].tolist(), options["cosine"].tolist(), quiz.answer, answered.guess,
                              f"Cosine of each option's embedding row with “{vlv.shown(word)}”'s",
                              x_title="cosine similarity"), "lesson_embeddings")
            st.caption(f"The 8 rows nearest to “{plain(vlv.shown(word))}”, words and pieces alike.")
            st.dataframe(nearest, column_config=numbers(nearest), hide_index=True)


def attention_view(ckpt: Checkpoint, text: str) -> av.AttentionView:
    """The traced forward on the attention sentence, every head on: the Attention page's, cached and shared."""
    encoding = ui_lesson.encode(ckpt, text)
    return ui_attention.explore(ckpt, encoding)


@renders("heads")
def heads(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        text = ui_lesson.sentence(K.ATTENTION, ATTENTION_LABEL)
    view = attention_view(ckpt, text)
    grid = av.grid(view)
    with frame.lead:  # beside the options: the class reads the squares to answer
        fig = labelled_grid(attention_grid(grid.weights, grid.col_axis, grid.row_axis, view.heads_on,
                                           f"All {view.num_layers * view.num_heads} heads on this sentence"),
                            view.num_layers, view.num_heads)
        chart(fig, "lesson_heads", keep_ticks=True)
        st.caption("Each square is one head: layers down (L), heads across (H). In a square, row = the token looking "
                   "(query), column = the token looked at (key); darker = more weight. "
                   + ("Point at a square for its tokens." if grid_is_compact(view.num_layers, view.num_heads) else
                      "The queries are labelled left, the keys below."))
    quiz, table = vlh.previous_token(view, ui_lesson.computed(ckpt, vlh.previous_elsewhere, text))
    if answered := ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text), lambda: quiz):
        top = table.head(12)
        shown = "" if len(top) == len(table) else f" (the {len(top)} of {len(table)} heads that do it most)"
        chart(answer_bars(top["head"].tolist(), top["score"].tolist(), quiz.answer, answered.guess,
                          "Weight on the previous token, mean over the words" + shown, value_format=".0%",
                          x_title="previous-token score",
                          reference=(vlh.CLEAR / len(view.tokens), f"{vlh.CLEAR} × even attention")),
              "lesson_previous_token", where=frame.below)


@renders("softmax")
def softmax(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        text = ui_lesson.sentence(K.ATTENTION, ATTENTION_LABEL)
        view = attention_view(ckpt, text)
        if state.get(K.HEAD_FOR) != str(ckpt.path):  # a new model: start from its own pronoun head
            state.forget(K.HEAD)
            state.put(K.HEAD_FOR, str(ckpt.path))
        names = av.head_names(view.num_layers, view.num_heads)
        pronouns = ui_lesson.computed(ckpt, vlh.pronoun_heads, text)  # None: the model reads too few tokens for them
        name = ui_lesson.choice(K.HEAD, "Head", names, pronouns.best if pronouns else names[0],
                         help="It starts on the head that follows pronouns to their nouns most on other sentences "
                              "(this one left out); the note below says how it does on sentences held out from "
                              "that choice.")
        chosen = HeadId.parse(name)
        layer, head = chosen.layer, chosen.head
        query = av.default_query(view)
        st.markdown(f"The query: **{plain(view.tokens[query])}** (position {query}); "
                    f"{av.sqrt_head_dim(view.head_dim)}.")
        if pronouns:
            st.caption(plain(pronouns.note(layer, head)))
    quiz, steps = vlh.strongest_key(view, layer, head, query)
    if ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text, name), lambda: quiz):
        with frame.below:
            chart(softmax_bars(av.weights_by_key(view, steps), f"Weights from “{view.tokens[query]}” in {name}"),
                  "lesson_softmax")
            table, note = vlh.steps_table(steps)
            st.caption(note)
            st.dataframe(table, column_config=numbers(table, "%.3f"))


@renders("guess")
def mask(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        text = ui_lesson.sentence(K.MASKED, MASKED_LABEL)
    quiz, guessed = ui_lesson.computed(ckpt, vl.mask_guess, ui_lesson.encode(ckpt, text))
    if ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text), lambda: quiz):
        chart(prediction_bars(vpr.candidate_rows(guessed), f"BERT's top {len(guessed.candidates)} at "
                                                             f"[MASK]"), "lesson_mask", where=frame.below)


@renders("why")
def mattered(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        text = ui_lesson.sentence(K.MASKED, MASKED_LABEL)
    quiz, found = ui_lesson.computed(ckpt, vlw.word_that_mattered, ui_lesson.encode(ckpt, text))
    if answered := ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text), lambda: quiz):
        occlusion, attention = frame.below.columns(2)
        chart(answer_bars(found.labels, found.drop.tolist(), quiz.answer, answered.guess,
                          f"Occlusion, for “{found.guess}”",
                          x_title=f"drop in its logit, the word hidden under {found.mask}"),
              "lesson_occlusion", where=occlusion)
        chart(answer_bars(found.labels, found.weight.tolist(), found.attended, answered.guess, "Attention, last layer",
                          x_title=f"weight from {found.mask}, mean over heads"),
              "lesson_attention_from_mask", where=attention)
        frame.below.caption("Occlusion tests each word: it hides the word and reads the guess's score again. "
                            "Attention only says where the last layer looked. The “Why this guess?” page sets six "
                            "more measures beside these two, and the causal test that settles which to believe.")
        if frame.below.button("Open “Why this guess?” on this sentence", key=f"{K.REVEAL.name}.why",
                              icon=":material/psychology_alt:"):
            ui_why.hand_off(text)
            st.switch_page("pages/why.py")


@renders("patching")
def answer_path(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    quiz, found = ui_lesson.computed(ckpt, vlp.answer_path)
    frame.left.caption(f"The pair is one of the built-in minimal pairs: the verb agrees with the subject, and a noun "
                       f"of the other number stands between them. The score: {found.metric} at the [MASK].")
    if ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, vlp.PAIR), lambda: quiz):
        with frame.below:
            chart(grid_heatmap(found.values, found.f, found.rows, columns("resid", found.tokens, 0),
                               "The residual stream, clean into corrupted: the share of the answer each vector "
                               "brings back", metric=found.metric), "lesson_patching")
            st.markdown("\n".join(f"- {plain(s)}" for s in found.sentences))
            st.caption("A row is a depth (the embeddings, then each layer's output), a column a position; 1 brings the "
                       "clean answer all the way back, 0 leaves the corrupted one. The “Where is the answer made?” "
                       "page patches the attention and feed-forward blocks and every head too, on other pairs.")
            if st.button("Open “Where is the answer made?”", key=f"{K.REVEAL.name}.open_patching",
                         icon=":material/swap_horiz:"):
                st.switch_page("pages/patching.py")


@st.cache_data(max_entries=16, show_spinner="Reading the story world through every neuron (once per model)…")
def _story_neuron(key: ModelKey, _view: Callable, _ckpt: Checkpoint):
    """The neuron step's `_view(ckpt)` (it reads the index kept beside the model, not only its weights), cached per
    model and device like ui_lesson.computed, and shared by every session."""
    return _view(_ckpt)


@renders("neurons")
def neuron_fires(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    quiz, found = _story_neuron(model_key(ckpt), vln.story_neuron, ckpt)
    frame.left.caption(f"Layers and neurons count from 0. Over the story world this neuron's mean activation is "
                       f"{found.mean:.3f}.")
    if answered := ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, found.name), lambda: quiz):
        with frame.below:
            chart(answer_bars(found.labels, found.values.tolist(), quiz.answer, answered.guess,
                              f"The activation of {found.name} at each word", x_title="activation"),
                  "lesson_neurons")
            st.markdown(f"**Its top {len(found.contexts)} contexts in the story world** (the firing word in bold):\n"
                        + "\n".join(f"- {c.value:.3f}: " + " ".join(f"**{plain(w)}**" if i == c.position else plain(w)
                                                                     for i, w in enumerate(c.words))
                                     for c in found.contexts))
            st.caption("What fires a neuron is read off the model, not told to it; what it writes when it fires, and "
                       "what switching it off does to a guess, are on the “Inside the feed-forward layer” page.")
            if st.button("Open “Inside the feed-forward layer”", key=f"{K.REVEAL.name}.open_neurons",
                         icon=":material/hub:"):
                st.switch_page("pages/neurons.py")


@renders("loss")
def loss(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        text = ui_lesson.sentence(K.MASKED, MASKED_LABEL)
        true_word = ui_lesson.sentence(K.TRUE_WORD, "The word that was really there")
    quiz, m = ui_lesson.computed(ckpt, vl.mask_loss, text, true_word)
    if ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text, true_word), lambda: quiz):
        with frame.below:
            cells = st.columns(3)
            cells[0].metric(f"p(“{plain(m.true_token)}”)", f"{m.p_true:.4f}", help=f"Rank {m.rank} among all tokens.")
            cells[1].metric("Loss = −log p", f"{m.neg_log_p:.3f}")
            cells[2].metric("ln V (a uniform guess)", f"{math.log(ckpt.tokenizer.vocab_size):.3f}")
            chart(topk_grid([vl.loss_panel(m)], columns=1), "lesson_loss")


@renders("nsp")
def next_sentence(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    shown = state.get(K.ANSWERS).get(state.get(K.STEP))  # B stays folded away until its pair is revealed
    revealed = shown is not None and shown.basis == ui_lesson.basis(ckpt, state.get(K.NSP_A), state.get(K.NSP_B))
    with frame.left:
        text_a = ui_lesson.sentence(K.NSP_A, "Sentence A")
        with st.expander("The sentence that really comes next (the class sees it after Reveal)", expanded=revealed,
                         icon=":material/edit:"):
            text_b = ui_lesson.sentence(K.NSP_B, "Sentence B")
        st.caption("BERT reads A with each of the two sentences B of the question: one came right after A, the "
                   f"other is from another story of the lab's corpus. {vl.written_note(ckpt.tokenizer)}")
    quiz, table = ui_lesson.computed(ckpt, vl.next_sentence, text_a, text_b)
    if answered := ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, text_a, text_b), lambda: quiz):
        with frame.below:
            chart(answer_bars(table["sentence B"].tolist(), table["P(IsNext)"].tolist(), quiz.answer,
                              answered.guess, "P(IsNext) for each sentence B", x_title="P(IsNext)",
                              reference=(0.5, "0.5")), "lesson_nsp")
            st.dataframe(table, hide_index=True, column_config={"P(IsNext)": number("%.4f"),
                                                                 "L_NSP": number("%.4f")})


@renders("training")
def training(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    t, vocab = lesson_runs.TINY, lesson_runs.tiny_vocab_size()
    frame.left.caption(f"The tiny BERT: {t.layers} layers of {t.heads} heads, hidden size {t.hidden}, "
                       f"{vocab:,} tokens; {t.steps} steps of AdamW (peak learning rate {t.lr:g}) on batches "
                       f"of {t.batch_size} sequences of up to {t.seq_len} tokens. Seconds on a laptop's CPU.")
    question, _ = lesson_runs.start_question(vocab)

    if ui_lesson.ask(frame.bar, question, ("tiny BERT", vocab), lambda: lesson_runs.start_loss(vocab, ui_lesson.training_run()[2])):
        with frame.below:
            seed, train, held_out = ui_lesson.training_run()
            chart(ui_lesson.training_chart(train, held_out), "lesson_training")
            first, last = held_out[0].loss, held_out[-1].loss
            st.caption(f"Seed {seed}: held-out loss {first:.3f} at step 0, {last:.3f} after {held_out[-1].step} "
                       f"steps. {lesson_runs.frequency_note(held_out, vocab)} The Pretrain page trains for longer.")
            if st.button("Train again with a new seed", key=K.RETRAIN.name, icon=":material/replay:"):
                ui_lesson.train_live(seed + 1)
                st.rerun()


@renders("probe")
def fine_tuning(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        task = ui_lesson.choice(K.TASK, "Task", list(lesson_runs.PROBE_TASKS), lesson_runs.PROBE_TASKS[0],
                         format_func=lambda name: f"{name}: {tasks.BUILTIN[name].description}")
    about = ui_lesson.basis(ckpt, task)
    if answered := ui_lesson.ask(frame.bar, lesson_runs.probe_question(), about, lambda: lesson_runs.probe_quiz(ui_lesson.probes(ckpt, task))):
        with frame.below:
            result = ui_lesson.probes(ckpt, task)
            labels = list(result.accuracy)
            chart(answer_bars(labels, list(result.accuracy.values()), answered.quiz.answer, answered.guess,
                              f"Dev accuracy of a linear probe, {result.task}", value_format=".1%",
                              x_title="dev accuracy", reference=(result.majority, "commonest label")),
                  "lesson_finetune")
            shipped = Path(ckpt.path).resolve() == Path(state.Model.PATH.default).resolve()
            st.caption(lesson_runs.full_fine_tuning(task, shipped))
            if st.button("Open the Fine-tune page", key=f"{K.REVEAL.name}.finetune", icon=":material/tune:"):
                st.switch_page("pages/finetune.py")


@renders("contextual")
def contextual(ckpt: Checkpoint, frame: ui_lesson.Frame) -> None:
    with frame.left:
        word = ui_lesson.sentence(K.SENSE_WORD, "Word")
        first = ui_lesson.sentence(K.SENSE_A, "Sentence 1")
        second = ui_lesson.sentence(K.SENSE_B, "Sentence 2 (the word in another sense)")
        third = ui_lesson.sentence(K.SENSE_C, "Sentence 3 (the word in sentence 1's sense again)")
    quiz, table = ui_lesson.computed(ckpt, vlv.contextual, word, [first, second, third])
    if ui_lesson.ask(frame.bar, quiz.question, ui_lesson.basis(ckpt, word, first, second, third), lambda: quiz):
        with frame.below:
            pairs = [vlv.SAME, vlv.OTHER]
            low = min(0.0, float(table[pairs].min().min()) - 0.05)
            chart(sense_lines(table, pairs, f"Cosine of sentence 1's “{word.strip()}” with the other two, within "
                                            "each layer", y_title="cosine", y_range=[low, 1.02]), "lesson_contextual")
            st.caption("Layer 0 is a function of the token and where it stands (and its segment, where the model has "
                       "them), not of the words around it; each layer after it mixes in the context. Read the two "
                       "lines at one layer at a time: each layer has its own geometry (in some, every vector points "
                       "much the same way), so a cosine at one layer does not compare with one at another. The "
                       "Representations page compares a word in many sentences, by sense.")
