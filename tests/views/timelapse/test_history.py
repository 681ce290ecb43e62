"""views/timelapse/history.py on frames made by hand: when a head forms, aligned word positions, the diff of two steps."""

import numpy as np

from bertviz_lab.views.timelapse import history as vt
from bertviz_lab.views.timelapse.frames import Frame
from tests.helpers.timelapse import TOKENS, raw


def frame(*args, **kwargs):
    return Frame.of(raw(*args, **kwargs))


def lapse(*frames):
    return vt.TimeLapse("test", list(frames))


def test_a_head_forms_at_the_step_from_which_it_stays_above_the_line():
    steps = [0, 1, 2, 5, 10, 20]
    head0 = [0.9, 0.9, 0.95, 0.9, 0.9, 0.9]  # a role from the start
    head1 = [0.1, 0.6, 0.4, 0.7, 0.8, 0.85]  # crosses at 1, falls back at 2, stays from 5 on
    history = lapse(*(frame(s, [a, b]) for s, a, b in zip(steps, head0, head1)))
    found = vt.formed(history, "previous")
    assert [(f.layer, f.head, f.step) for f in found] == [(0, 0, 0), (0, 1, 5)]
    assert found[1].score == 0.85
    assert vt.formed(history, "previous", threshold=0.9)[0].head == 0 and len(vt.formed(history, "previous", 0.9)) == 1
    series = vt.role_series(history, "previous")
    assert series.shape == (6, 1, 2) and series[3, 0, 1] == 0.7
    assert np.isnan(vt.role_series(history, "det_noun")).all()  # a role a frame lacks is NaN, not 0


def test_positions_turn_each_frame_onto_the_next_without_stretching():
    xy = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0], [0.0, -2.0]])
    turn = np.array([[0.0, -1.0], [1.0, 0.0]])  # 90 degrees
    history = lapse(frame(0, [0, 0], xy=xy @ turn * 3 + 5), frame(1, [0, 0], xy=xy * -1))  # turned, scaled, moved
    first, last = vt.positions(history)
    np.testing.assert_allclose(first, last, atol=1e-12)  # the same arrangement lands on the same place
    assert abs(np.sqrt((last**2).sum(1).mean()) - 1) < 1e-12 and np.allclose(last.mean(0), 0)
    moved = lapse(frame(0, [0, 0], xy=xy[[1, 0, 2, 3]]), frame(1, [0, 0], xy=xy))  # two words swapped
    assert not np.allclose(*vt.positions(moved))


def test_the_diff_measures_how_far_each_heads_attention_moved():
    before = np.stack([np.eye(5), np.eye(5)])[None]
    after = before.copy()
    after[0, 1] = np.roll(np.eye(5), 1, axis=1)  # head 1: every word now looks at the previous token
    after[0, 0, 1:4] = 0.5 * np.eye(5)[1:4] + 0.5 * np.roll(np.eye(5), -1, axis=1)[1:4]  # head 0: half moved
    a, b = frame(0, [0.0, 0.0], before), frame(100, [0.0, 1.0], after, top=(("cat", 0.3),))
    changes = vt.head_changes(a, b)
    assert list(changes["head"]) == ["layer 0 head 1", "layer 0 head 0"]
    np.testing.assert_allclose(changes["distance"], [1.0, 0.5])  # total variation over the word tokens
    assert changes["after"][0] == "previous token 1.00" and changes["before"][0] == "itself 1.00"
    assert vt.head_changes(a, a)["distance"].max() == 0
    guesses = vt.prediction_changes(a, b)
    assert guesses.iloc[0]["sentence"] == "the cat sat on the [MASK] ."
    assert (guesses.iloc[0]["guess at 0"], guesses.iloc[0]["guess at 100"], guesses.iloc[0]["changed"]) == (
        "mat", "cat", True)


def test_frames_of_another_sentence_set_or_broken_are_left_out():
    records = [raw(0, [0.1, 0.1], text="a dog ran ."), raw(1, [0.2, 0.3]), raw(2, [0.2, 0.3])]
    records.append({**raw(3, [0.2, 0.3]), "roles": {"previous": [[0.1]]}})  # (1, 1) scores for a 1 x 2 model
    records.append({**raw(4, [0.2, 0.3]), "probes": []})  # nothing to show
    assert [f.step for f in vt._frames(records)] == [1, 2]  # the last good frame's sentences decide
    nan = raw(5, [0.2, 0.3], attention=np.full((1, 2, 5, 5), np.nan))
    assert Frame.of(nan) is None and vt._frames([]) == []


def test_a_head_near_uniform_attention_plays_no_role():
    T = len(TOKENS)
    near_uniform = frame(0, [1 / T + 0.01, 0.9])  # head 0: 0.21 where uniform gives 0.20; head 1 a previous head
    near_uniform.roles["self"] = np.array([[1 / T, 0.1]])
    assert near_uniform.chance == {"previous": 1 / T, "self": 1 / T}  # no recorded chance: 1/T
    assert vt.role_text(near_uniform, 0, 0) == "no clear role (best 0.21, uniform 0.20)"
    assert vt.role_text(near_uniform, 0, 1) == "previous token 0.90"
    recorded = Frame.of({**raw(0, [0.5, 0.9]), "chance": {"previous": 0.3, "self": 0.6}})
    assert recorded.chance == {"previous": 0.3, "self": 0.6}  # a snapshot's own uniform scores win
    assert vt.role_text(recorded, 0, 0) == "no clear role (best 1.00, uniform 0.60)"  # 0.5 < 2 x 0.3, 1 < 2 x 0.6
    assert vt.role_text(recorded, 0, 1) == "previous token 0.90"
    changes = vt.head_changes(near_uniform, recorded).set_index("head")
    assert changes.loc["layer 0 head 0", "before"].startswith("no clear role")


def test_a_grammatical_role_that_is_a_positional_one_on_the_probes_reads_as_positional_first():
    probe_set = frame(0, [0.88, 0.1])  # "the cat sat on the mat .": its verb's subject is the word before it
    probe_set.roles.update(verb_subject=np.array([[0.98, 0.1]]), self=np.array([[0.0, 0.1]]))
    probe_set.chance["verb_subject"] = 0.2
    assert vt.twins(probe_set) == {"det_noun": "next", "verb_subject": "previous"}
    assert vt.role_text(probe_set, 0, 0) == "previous token 0.88 (= verb → subject 0.98)"
    assert "cannot be told apart from previous- and next-token heads here" in vt.twins_note(probe_set)
    history = lapse(probe_set)
    (line,) = vt.formed_lines(history, "verb_subject")
    assert "becomes a" not in line and "every such link goes to the previous token" in line and "score over all " \
        "words: 88%" in line
    assert vt.formed_lines(history, "previous") == ["- **layer 0 head 0** becomes a *previous token* head around step "
                                                    "**0** (88% at step 0)"]
    # a sentence the probe set does not hold: its links are not known, so no claim either way
    other = frame(0, [0.88, 0.1], text="a dog ran .")
    other.roles.update(verb_subject=np.array([[0.98, 0.1]]), self=np.array([[0.0, 0.1]]))
    other.chance["verb_subject"] = 0.2
    assert vt.twins(other) == {} and vt.twins_note(other) == ""
    assert vt.role_text(other, 0, 0) == "verb → subject 0.98"


def test_the_guess_table_gives_the_top_guess_and_its_own_probability():
    a, b = frame(0, [0, 0], top=(("cat", 0.3), ("mat", 0.2))), frame(10, [0, 0], top=(("mat", 0.6),))
    row = vt.prediction_changes(a, b).iloc[0]
    assert (row["guess at 0"], row["p(guess) at 0"], row["guess at 10"], row["p(guess) at 10"]) == ("cat", 0.3,
                                                                                                  "mat", 0.6)
    assert not any(c.startswith("p at") or "true word)" in c for c in row.index)


def test_the_role_chart_says_its_frames_are_not_to_scale_and_draws_uniform_attention():
    from bertviz_lab.figures import timelapse as ft

    steps = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 1500]
    fig = ft.role_lines(steps, np.zeros((len(steps), 1, 2)), "previous", 3, "roles", chance=0.09)
    axis = fig.layout.xaxis
    assert "checkpoint" in axis.title.text and "not to scale" in axis.title.text
    assert list(axis.tickvals) == list(range(len(steps))) and axis.ticktext[-1] == "1,500"
    assert [s.y0 for s in fig.layout.shapes if s.line.dash == "dash"] == [0.09]


def test_the_word_map_note_gives_the_share_drawn_and_the_share_left_out():
    from bertviz_lab.ui.timelapse.player import word_map_note

    note = word_map_note(25, 0.26, "Written out: the first word of each group (cat, sat).")
    assert "25 words" in note and "hold 26% of the variance" in note and "other 74%" in note
    assert "Written out: the first word of each group (cat, sat). Point at a dot" in note


def test_the_word_map_labels_are_the_ones_its_note_names():
    from bertviz_lab.ui.timelapse.player import MAP_LABELS, map_labels

    words, groups = ["cat", "dog", "sat", "ran", "the", "a"], ["animals"] * 2 + ["verbs"] * 2 + ["function"] * 2
    labels, note = map_labels(words, groups, ["[CLS]", "the", "dog", "ran", ".", "[SEP]"])
    assert labels == ["dog", "ran", "the"]
    assert note == "Written out: the probe sentence's words on the map (dog, ran, the)."
    labels, note = map_labels(words, groups, ["[CLS]", "a", "dog", "[SEP]"])  # fewer than 3: a word per group too
    assert labels == ["dog", "a", "cat", "sat", "the"]
    assert note == ("Written out: the probe sentence's words on the map (dog, a) and the first word of each group "
                    "(cat, sat, the).")
    many = [f"w{i}" for i in range(MAP_LABELS + 2)]
    labels, note = map_labels(many, ["g"] * len(many), many)
    assert labels == many[:MAP_LABELS] and note.endswith(f", the first {MAP_LABELS} of them.")
