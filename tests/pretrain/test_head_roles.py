"""Head roles and `python -m bertviz_lab heads`: parity with transformers' attention weights, bad input."""

import re

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from bertviz_lab.cli import main
from bertviz_lab.corpus import vocabulary
from bertviz_lab.corpus.probes import PROBES, ProbeSentence
from bertviz_lab.pretrain import head_roles
from bertviz_lab.pretrain.head_roles import MAX_SENTENCES, POSITIONAL_ROLES, ROLES
from tests.cli.test_explore import run_cli
from tests.helpers.cli import corrupt, run_broken
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
VOCAB = [*SPECIAL_TOKENS, *sorted(set(vocabulary()) | {"."}), "##s", "##ing"]
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=64, initializer_range=0.3, max_position_embeddings=40)
MINE = ["the cats sat on the mat .", "i went walking to the bank yesterday and it was raining ."]


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory):
    """A random transformers BertForMaskedLM (peaked attention: a wide init) over the story world's words."""
    torch.manual_seed(1)
    hf = transformers.BertForMaskedLM(transformers.BertConfig(**CONFIG.to_dict(),
                                                              attn_implementation="eager")).eval()
    folder = tmp_path_factory.mktemp("hf")
    hf.save_pretrained(folder)
    WordPieceTokenizer.from_vocab(VOCAB).save(folder)
    return folder, hf, transformers.BertTokenizerFast.from_pretrained(folder)


def expected(hf, hf_tok, sentences, probes=None):
    """The definitions in docs/reference.md, computed from transformers' output_attentions with plain loops."""
    totals = {}
    for n, text in enumerate(sentences):
        enc = hf_tok(text, return_tensors="pt")
        with torch.no_grad():
            att = torch.stack(hf(**enc, output_attentions=True).attentions)[:, 0].double().numpy()  # (L, H, T, T)
        tokens = hf_tok.convert_ids_to_tokens(enc["input_ids"][0])
        T = len(tokens)
        words = range(1, T - 1)
        seps = [i for i, t in enumerate(tokens) if t == "[SEP]"]
        got = {"previous": np.mean([att[..., i, i - 1] for i in words], 0),
               "next": np.mean([att[..., i, i + 1] for i in words], 0),
               "self": np.mean([att[..., i, i] for i in words], 0),
               "cls": np.mean([att[..., i, 0] for i in words], 0),
               "sep": np.mean([sum(att[..., i, j] for j in seps) for i in words], 0)}
        if probes:
            first = {}  # word index -> token positions (every probe word is one token of this vocabulary)
            for pos, word in enumerate(enc.word_ids()):
                if word is not None:
                    first.setdefault(word, pos)
            for role, links in probes[n].links.items():
                got[role] = np.mean([att[..., first[a], first[b]] for a, b in links], 0)
        for role, value in got.items():
            totals.setdefault(role, []).append(value)
    return {role: np.mean(values, 0) for role, values in totals.items()}


def heads_json(capsys, folder, *sentences):
    assert main(["heads", "--checkpoint", str(folder), "--device", "cpu", "--json", *sentences]) == 0
    import json
    return json.loads(capsys.readouterr().out)


def test_probe_set_scores_match_transformers_attention(hf_checkpoint, capsys):
    folder, hf, hf_tok = hf_checkpoint
    out = heads_json(capsys, folder)
    assert out["sentences"] == [p.text for p in PROBES]
    assert (out["layers"], out["heads"]) == (3, 4) and list(out["scores"]) == list(ROLES)
    want = expected(hf, hf_tok, out["sentences"], PROBES)
    for role in ROLES:
        np.testing.assert_allclose(out["scores"][role], want[role], atol=1e-5, rtol=0, err_msg=role)
    positional = sum(np.array(out["scores"][r]) for r in POSITIONAL_ROLES)
    assert np.all(positional <= 1 + 1e-5) and np.ptp(out["scores"]["previous"]) > 0.05  # heads differ


def test_own_sentences_score_the_positional_roles_only(hf_checkpoint, capsys):
    folder, hf, hf_tok = hf_checkpoint
    out = heads_json(capsys, folder, *MINE)
    assert out["sentences"] == MINE and list(out["scores"]) == list(POSITIONAL_ROLES)
    want = expected(hf, hf_tok, MINE)
    for role in POSITIONAL_ROLES:
        np.testing.assert_allclose(out["scores"][role], want[role], atol=1e-5, rtol=0, err_msg=role)


def test_the_shipped_model_has_its_previous_and_next_token_heads(capsys):
    out = heads_json(capsys, SHIPPED)
    previous, nxt = np.array(out["scores"]["previous"]), np.array(out["scores"]["next"])
    assert previous[0, 2] > 0.8 and nxt[1, 2] > 0.8  # the heads docs/reference.md names
    assert np.unravel_index(previous.argmax(), previous.shape) == (0, 2)
    assert np.unravel_index(nxt.argmax(), nxt.shape) == (1, 2)


def test_the_table_names_the_strongest_head_of_each_role(capsys):
    assert main(["heads", "--checkpoint", str(SHIPPED), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("6 sentences (the probe set)")
    assert re.search(r"previous: to previous token \(strongest: layer 0 head 2, 0\.8\d\)", text)
    assert "pronoun_referent: to pronoun → referent" in text
    assert sum(line.startswith("layer 3 ") for line in text.splitlines()) == len(ROLES)


NOTE = ("In these probe sentences every verb's subject is the word just before it and every determiner's noun the "
        "word just after, so 'verb → subject' and 'determiner → noun' cannot be told apart from previous- and "
        "next-token heads here.")


def test_a_grammatical_role_whose_links_are_all_neighbours_is_named_as_positional_too():
    assert head_roles.twins() == {"verb_subject": "previous", "det_noun": "next"}  # computed from the probes' links
    assert head_roles.twins_note() == NOTE
    one_apart = ProbeSentence("the cat sat .", 1, {"det_noun": ((0, 1),), "verb_subject": ((2, 1),)})
    two_apart = ProbeSentence("the big cat soon sat .", 2, {"det_noun": ((0, 2),), "verb_subject": ((4, 2),)})
    assert head_roles.twins([one_apart, two_apart]) == {}  # one link not to a neighbour: the roles differ
    assert head_roles.twins_note([one_apart, two_apart]) == "" and head_roles.twins_note([]) == ""
    assert head_roles.twins_note([ProbeSentence("the cat sat .", 1, {"verb_subject": ((2, 1),)})]) == (
        "In these probe sentences every verb's subject is the word just before it, so 'verb → subject' cannot be "
        "told apart from previous-token heads here.")


def test_the_heads_command_says_which_grammatical_roles_are_positional_here(hf_checkpoint, capsys):
    folder = hf_checkpoint[0]
    assert main(["heads", "--checkpoint", str(folder), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert NOTE in text
    assert re.search(r"verb_subject: to verb → subject \(strongest: .*\); on the probe set every such link goes "
                     r"to the previous token", text)
    assert re.search(r"det_noun: .*; on the probe set every such link goes to the next token", text)
    assert re.search(r"pronoun_referent: to pronoun → referent \(strongest: [^)]*\)\n", text)  # links far apart
    assert heads_json(capsys, folder)["twins"] == {"verb_subject": "previous", "det_noun": "next"}
    assert heads_json(capsys, folder, *MINE)["twins"] == {}  # own sentences: no links, no claim
    assert main(["heads", "--checkpoint", str(folder), "--device", "cpu", *MINE]) == 0
    assert NOTE not in capsys.readouterr().out


BAD = {
    "blank sentence": (None, ["the cat", " "], "sentence 2 is empty"),
    "too many sentences": (None, ["the cat ."] * (MAX_SENTENCES + 1), f"at most {MAX_SENTENCES}"),
    "sentence too long": (None, ["the cat", "a cat " * 40], "at most 64"),
    "missing folder": ("rm", ["the cat"], "no model folder"),
    "corrupt weights": (corrupt, ["the cat"], "model.safetensors is .*corrupt"),
    "unknown device": (None, ["--device", "tpu", "the cat"], "unknown device"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_exit_2(tiny_checkpoint, tmp_path, capsys, case):
    breaker, args, message = BAD[case]
    captured = run_broken(tiny_checkpoint, tmp_path, capsys, breaker, "heads", args)
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1 and captured.out == ""
    assert re.search(message, captured.err), captured.err


def test_a_real_process_prints_json_and_refuses_quietly(tiny_checkpoint):
    done = run_cli("heads", "--checkpoint", tiny_checkpoint, "--json", "the cat sat on the mat .")
    assert done.returncode == 0 and '"previous"' in done.stdout
    done = run_cli("heads", "--checkpoint", tiny_checkpoint, "")
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
