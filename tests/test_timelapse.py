"""views/timelapse.py on frames made by hand: when a head forms, aligned word positions, the diff of two steps."""

import numpy as np

from bertviz_lab.views import timelapse as vt

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]


def frame(*args, **kwargs):
    return vt._checked(raw(*args, **kwargs))


def raw(step, previous, attention=None, xy=None, top=(("mat", 0.5),), text="the cat sat on the mat ."):
    """A snapshot record of a 1-layer, 2-head model on one sentence."""
    eye = np.eye(5)
    attention = np.stack([eye, eye])[None] if attention is None else attention  # (1, 2, 5, 5)
    xy = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0], [0.0, -2.0]]) if xy is None else xy
    record = {"kind": "snapshot", "step": step, "layers": 1, "heads": 2,
              "probes": [{"text": text, "tokens": TOKENS, "attention": attention.tolist(),
                          "masked": "mat", "top": [list(t) for t in top]}],
              "roles": {"previous": [previous], "self": [[1.0, 1.0]]},
              "words": {"words": list("abcd"), "groups": ["x", "x", "y", "y"], "xy": xy.tolist(), "explained": 0.9}}
    return record


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
    assert [f["step"] for f in vt._frames(records)] == [1, 2]  # the last good frame's sentences decide
    nan = raw(5, [0.2, 0.3], attention=np.full((1, 2, 5, 5), np.nan))
    assert vt._checked(nan) is None and vt._frames([]) == []
