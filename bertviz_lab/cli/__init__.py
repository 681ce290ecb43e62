"""Command line: `python -m bertviz_lab COMMAND ...`, or `bertviz-lab COMMAND ...` where the lab is installed with pip.

app         start the app from any folder (--classroom serves the room; other arguments go to Streamlit)

predict     top-k guesses for each [MASK] of a sentence (or a pair), as a table or JSON
similarity  one word's vectors in several sentences: their cosine matrix at every layer
lens        the logit lens: the MLM head's top-k at each [MASK] after every layer
heads       each head's role scores (previous, next, self, [CLS], [SEP]; on the probe set also
            determiner -> noun, verb -> subject, pronoun -> referent), as tables or JSON
info        a checkpoint's shape and model card
attribute   which tokens made the model guess its word at a [MASK]: eight attribution methods (attention,
            rollout, flow, value-weighted norm, gradient, gradient x input, integrated gradients, occlusion),
            their agreement and the deletion check, as a table or JSON
patch       where is the answer made? activation patching between a clean and a corrupted sentence: the residual
            stream, the attention and feed-forward blocks, the heads, one head's query, key and value, as tables or JSON
neurons     inside the feed-forward layer: a sentence's most active neurons and their factors, the neurons behind a
            [MASK] guess with the causal test against random ones, or one neuron's top contexts over a corpus, what it
            writes and what switching it off does, as tables or JSON
syntax      what the model knows of grammar over a corpus (the story world's trees or a CoNLL-U file): the heads
            that follow each dependency relation, the structural probe by layer against a random-weights control,
            subject-verb agreement across attractors, as tables or JSON
probe       what a probe can and cannot show: part of speech, dependency label, coreference and noun number probed
            at every hidden state against control tasks (linear and MLP), the online codelength, a random-weights
            twin and the scalar mix's expected layer; with --amnesic, is what is found used? As tables or JSON
classify    a fine-tuned checkpoint on a sentence (or a pair): each label's probability, or each token's tag
train       pretrain a BERT into a run folder (the same command the app starts; works under torchrun)
finetune    fine-tune a classifier (a built-in task or a CSV) from a checkpoint or from scratch into a run
            folder (the same command the Fine-tune page starts)
publish     evaluate a run's last checkpoint and copy it, with a model card, to a folder the app lists
runs        list, stop, resume or delete the pretraining and fine-tuning runs under $BERTVIZ_RUNS
            (default runs/): the functions the Pretrain and Fine-tune pages' buttons call

Every --checkpoint takes a model folder or a Hugging Face Hub id (bert-base-uncased, org/name): a folder
that exists wins; a Hub id opens from the Hugging Face cache, downloaded into it the first time.

explore.py holds predict, similarity, lens, heads and info; explain.py attribute; patching.py patch; neurons.py
neurons; syntax.py syntax; probing.py probe; finetune.py finetune and classify; training.py train, publish and runs.
They sit on views/, syntax/, probing/, finetune/ and pretrain/ and import them lazily, so `--help` is instant. User
mistakes print one line on stderr and exit with status 2; nothing a user types should produce a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from bertviz_lab.cli import app as cli_app, explain, explore, finetune, syntax, training
from bertviz_lab.cli import neurons as neurons_cli
from bertviz_lab.cli import patching as patching_cli
from bertviz_lab.cli.common import EXIT_USAGE
from bertviz_lab.cli.explore import model_card
from bertviz_lab.cli.probing import COMMANDS as PROBE_COMMANDS
from bertviz_lab.cli.probing import add_parser as add_probe_parser
from bertviz_lab.errors import LabError

__all__ = ["EXIT_USAGE", "build_parser", "console", "main", "model_card"]
COMMANDS = {**cli_app.COMMANDS, **explore.COMMANDS, **explain.COMMANDS, **patching_cli.COMMANDS,
            **neurons_cli.COMMANDS, **syntax.COMMANDS, **PROBE_COMMANDS, **finetune.COMMANDS, **training.COMMANDS}


def build_parser(prog: str = "python -m bertviz_lab") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Watch BERT work.")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_app.add_parser(sub)
    explore.add_parsers(sub)  # predict, similarity, lens, heads, info
    explain.add_parser(sub)  # attribute
    patching_cli.add_parser(sub)  # patch
    neurons_cli.add_parser(sub)  # neurons
    syntax.add_parser(sub)
    add_probe_parser(sub)  # probe
    finetune.add_classify_parser(sub)
    training.add_train_parser(sub)
    finetune.add_finetune_parser(sub)
    training.add_publish_parser(sub)
    training.add_runs_parser(sub)
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m bertviz_lab") -> int:
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    parser = build_parser(prog)
    args, extra = parser.parse_known_args(argv)
    if args.command != "app" and extra:  # only `app` passes arguments on (to Streamlit)
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    args.argv = argv  # what a run folder records as the command that started it
    try:
        return COMMANDS[args.command](args)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `... | head` stopped reading: stop quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush fails silently
        return 0


def console() -> None:
    """The `bertviz-lab` console script (pyproject.toml's [project.scripts])."""
    sys.exit(main(prog="bertviz-lab"))
