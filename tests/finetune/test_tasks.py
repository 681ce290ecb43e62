"""The built-in downstream tasks and the learner's CSV: what the generator knows, and every refusal."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.finetune import data as ft_data, tasks
from bertviz_lab.finetune.tasks import AGREEMENT, DETERMINERS


@pytest.fixture(scope="module", params=list(tasks.BUILTIN))
def task(request):
    return tasks.builtin(request.param)


def key(example):
    return (example.text, example.text_b, example.label, example.tags)


def test_splits_are_fixed_balanced_and_disjoint(task):
    assert (len(task.train), len(task.dev), len(task.test)) == tuple(tasks.SPLIT_SIZES.values())
    assert task.description and task.kind in tasks.KIND_NAMES
    train = {key(e) for e in task.train}
    assert not train & {key(e) for e in task.dev} and not train & {key(e) for e in task.test}
    assert not {key(e) for e in task.dev} & {key(e) for e in task.test}
    if task.kind == tasks.TOKEN:
        counts = Counter(t for e in task.train for t in e.tags)
        assert set(counts) == set(task.labels) and all(len(e.tags) == len(e.text.split(" ")) for e in task.train)
    else:
        for split in (task.train, task.dev, task.test):
            counts = Counter(e.label for e in split)
            assert counts[task.labels[0]] == counts[task.labels[1]] == len(split) // 2


def test_a_task_is_the_same_every_time(task):
    make = tasks.BUILTIN[task.name].make
    used = set()
    make("train", tasks.SPLIT_SIZES["train"], used)
    again = make("dev", 50, used)
    assert [key(e) for e in again] == [key(e) for e in task.dev[:50]]


def test_a_broken_sentence_is_one_swap_away_from_a_corpus_sentence_and_not_itself_one():
    task = tasks.builtin("acceptability")
    every = tasks._all_sentences()
    kinds = Counter()
    for example in task.train:
        if example.label == "ok":
            assert example.text in every
            continue
        assert example.text not in every
        words = example.text.split(" ")
        # agreement: one word swapped for its partner gives back a corpus sentence
        fixes = [" ".join(words[:i] + [AGREEMENT[w]] + words[i + 1:]) for i, w in enumerate(words) if w in AGREEMENT]
        # order: one determiner moved back in front of its word
        fixes_order = [" ".join(words[:i] + [words[i + 1], words[i]] + words[i + 2:])
                       for i in range(len(words) - 1) if words[i + 1] in DETERMINERS]
        found = [f for f in fixes if f in every], [f for f in fixes_order if f in every]
        assert found[0] or found[1], example.text
        kinds["agreement" if found[0] else "order"] += 1
    assert kinds["agreement"] > 200 and kinds["order"] > 200  # both kinds of damage are common


def test_follows_means_the_next_sentence_of_the_same_story():
    task = tasks.builtin("coherence")
    stories = [" ".join(story) for story in tasks._stories("train")]
    together = tasks._together()
    assert any(". " in e.text for e in task.train)  # text A is often two sentences: the story so far
    for example in task.train[:300]:
        if example.label == "follows":
            assert any(f"{example.text} {example.text_b}" in story for story in stories)
        else:
            context = [s for s in tasks._stories("train") if example.text in " ".join(s)]
            assert context and all((s, example.text_b) not in together for story in context for s in story
                                   if s in example.text)


def test_entity_tags_follow_the_lexicon_and_the_sense_of_apple():
    words, tags = tasks.entity_tags("i ate an apple in the netherlands on monday.")
    assert dict(zip(words, tags)) == {"i": "O", "ate": "O", "an": "O", "apple": "FOOD", "in": "O", "the": "O",
                                      "netherlands": "PLACE", "on": "O", "monday": "TIME", ".": "O"}
    assert dict(zip(*tasks.entity_tags("apple released a new device.")))["apple"] == "ORG"
    words, tags = tasks.entity_tags("anna flew to new zealand with a new bag.")
    assert [t for w, t in zip(words, tags) if w == "new"] == ["PLACE", "O"]
    assert tasks.entity_tags("the cat ate fish.") is None  # fish: an animal, a food and a verb
    lexicon, ambiguous = tasks.entity_lexicon()
    assert {"fish", "apple", "cook"} <= ambiguous and lexicon["cat"] == "ANIMAL" and lexicon["tom"] == "PERSON"
    task = tasks.builtin("entities")
    assert all(re.fullmatch(r"[^ ]+( [^ ]+)*", e.text) for e in task.train)


# --- The learner's CSV ----------------------------------------------------------------------------
def csv(*rows: str) -> bytes:
    return ("\n".join(rows) + "\n").encode()


def rows(n, make):
    return [make(i) for i in range(n)]


def test_three_layouts_and_a_split_column():
    task = ft_data.parse_csv(csv("text,label", *rows(30, lambda i: f"sentence {i},{'pos' if i % 2 else 'neg'}")),
                          "mine.csv")
    assert task.kind == tasks.SEQUENCE and set(task.labels) == {"pos", "neg"}
    assert (len(task.train), len(task.dev), len(task.test)) == (24, 3, 3) and task.source == "mine.csv"
    pair = ft_data.parse_csv(csv("label,text_b,text", *rows(20, lambda i: f"{'y' if i % 2 else 'n'},b {i},a {i}")))
    assert pair.kind == tasks.PAIR and pair.train[0].text.startswith("a ") and pair.train[0].text_b.startswith("b ")
    token = ft_data.parse_csv(csv("tokens,tags,split", *rows(12, lambda i: f"anna saw rex {i},PER O ANIMAL O,"
                                                         + ("dev" if i < 3 else "train"))))
    assert token.kind == tasks.TOKEN and token.labels[0] == "O" and set(token.labels) == {"O", "PER", "ANIMAL"}
    assert len(token.dev) == 3 and len(token.train) == 9 and token.train[0].tags == ("PER", "O", "ANIMAL", "O")


@pytest.mark.parametrize("raw, message", [
    (b"", "is empty"),
    (b"   \n\n", "is empty"),
    (b"\x00\x01binary", "not a text file"),
    (b"text,label\n\xff\xfe,1\n", "not UTF-8"),
    (csv("sentence,class", "a,b"), "needs a header row"),
    (csv("text,label", "one,", *rows(20, lambda i: f"s{i},{i % 2}")), "row 2: the label column is empty"),
    (csv("text,label", *rows(20, lambda i: f"s{i},same")), "needs at least two classes"),
    (csv("text,label,split", *rows(20, lambda i: f"s{i},{i % 2},train"), "d,2,dev", "e,0,dev"),
     "the dev rows use the label '2', which no training row has"),
    (csv("text,label,split", *rows(20, lambda i: f"s{i},{i % 2},valid")), "split must be train, dev or test"),
    (csv("tokens,tags", "a b c,X Y", *rows(20, lambda i: f"w{i},{i % 2}")), "row 2: 3 words but 2 tags"),
    (csv("text,label", *rows(5, lambda i: f"s{i},{i % 2}")), "needs at least 8 and 2"),
    (b'text,label\n"unclosed,1\n', "not a readable CSV file: unexpected end of data near line 2"),
])
def test_a_bad_csv_is_one_clear_sentence(raw, message):
    with pytest.raises(InputError, match=re.escape(message)):
        ft_data.parse_csv(raw, "mine.csv")


def test_a_huge_csv_is_refused_by_its_size(tmp_path):
    path = tmp_path / "huge.csv"
    with open(path, "wb") as f:
        f.write(b"text,label\n")
        f.truncate(100 << 20)  # 100 MB, sparse: the size alone refuses it
    with pytest.raises(InputError, match="is 104.9 MB; the limit is 20 MB"):
        ft_data.read_csv(path)
    with pytest.raises(InputError, match="20 MB; the limit is 20 MB"):
        ft_data.parse_csv(b"x" * (ft_data.MAX_CSV_BYTES + 1), "upload.csv")


def test_a_saved_task_reads_back_the_same(tmp_path):
    for name in tasks.BUILTIN:
        task = tasks.builtin(name)
        ft_data.save_task(task, tmp_path / f"{name}.json")
        assert ft_data.load_task(tmp_path / f"{name}.json") == task
    (tmp_path / "bad.json").write_text('{"name": 1}')
    with pytest.raises(InputError, match="not a saved task"):
        ft_data.load_task(tmp_path / "bad.json")
    with pytest.raises(InputError, match="cannot be read"):
        ft_data.load_task(tmp_path / "missing.json")
