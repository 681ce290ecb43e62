"""The fine-tuning commands: finetune (a run folder, as the Fine-tune page starts it) and classify (a
fine-tuned checkpoint on one sentence or pair)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bertviz_lab.cli.common import CHECKPOINT_HELP, absolute, load, printable
from bertviz_lab.errors import ConfigError, InputError

FLAGS = {"checkpoint": "--from", "scratch": "--from-scratch"}  # FinetuneConfig field -> flag, where not --name
BAR = 40  # characters of the probability bar at 100%


def flag_of(name: str) -> str:
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def add_classify_parser(sub) -> None:
    classify = sub.add_parser("classify", help="a fine-tuned checkpoint's classes for a sentence (or tags per token)")
    classify.add_argument("--checkpoint", required=True, help="a fine-tuned " + CHECKPOINT_HELP.removeprefix("a "))
    classify.add_argument("--json", action="store_true", help="print JSON instead of a table")
    classify.add_argument("--device", default="auto", help="auto, cpu or cuda")
    classify.add_argument("text", help="the sentence to classify (or tag)")
    classify.add_argument("text_b", nargs="?", default=None, help="the second sentence of a pair task")


def add_finetune_parser(sub) -> None:
    """One flag per FinetuneConfig field, named as `FinetuneConfig.cli_args` writes them (that is what
    `finetune.runs.start` launches), defaults from FinetuneConfig."""
    from dataclasses import fields

    from bertviz_lab.bert.config import PRESET_SHAPES
    from bertviz_lab.finetune.config import FinetuneConfig
    from bertviz_lab.finetune.tasks import BUILTIN

    tune = sub.add_parser("finetune", help="fine-tune a classifier on a task into a run folder (what the app starts)")
    tune.add_argument("--run-dir", required=True, help="folder for config, task, metrics, status, checkpoints")
    tune.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint, with the "
                                                            "settings it recorded (give no other flags)")
    what, start = tune.add_mutually_exclusive_group(), tune.add_mutually_exclusive_group()
    what.add_argument("--task", metavar="NAME", default="", help=f"a built-in task: {', '.join(BUILTIN)}")
    what.add_argument("--data", metavar="FILE.csv", default="",
                      help="your own CSV: text,label or text,text_b,label or tokens,tags (optional split column)")
    start.add_argument("--from", dest="checkpoint", metavar="CHECKPOINT", default="",
                       help="start from this pretrained model folder")
    start.add_argument("--from-scratch", dest="scratch", metavar="PRESET", default="",
                       help=f"start from a random BERT of this size: {', '.join(PRESET_SHAPES)} (no pretraining)")
    for name, what in (("layers", "layers"), ("heads", "attention heads"), ("hidden", "hidden size")):
        tune.add_argument(flag_of(name), type=int, default=None, metavar="N",
                          help=f"with --from-scratch: the model's {what} (default: the preset's)")
    tune.add_argument("--freeze-encoder", action="store_true",
                      help="train the classifier only, on the frozen encoder's features (a linear probe)")
    done = {"task", "data", "checkpoint", "scratch", "layers", "heads", "hidden", "freeze_encoder"}
    for f in fields(FinetuneConfig):
        if f.name not in done:
            kind = {int: int, float: float, str: str}.get(type(f.default), int)
            tune.add_argument(flag_of(f.name), type=kind, default=f.default, help=f"default: {f.default}")


def config_of(args):
    """The FinetuneConfig the flags describe (a ConfigError names the first bad one)."""
    from dataclasses import fields

    from bertviz_lab.files import shipped_model
    from bertviz_lab.finetune.config import FinetuneConfig

    values = {f.name: getattr(args, f.name) for f in fields(FinetuneConfig)}
    if values["checkpoint"] and not os.path.lexists(values["checkpoint"]):  # --from bertviz-mini, from any folder
        values["checkpoint"] = str(shipped_model(values["checkpoint"]) or values["checkpoint"])
    values["checkpoint"], values["data"] = absolute(values["checkpoint"]), absolute(values["data"])
    return FinetuneConfig(**values)


def cmd_finetune(args) -> int:
    """Check everything (the data, the starting model, memory), then run in the folder until done or stopped.
    --resume continues a stopped or failed run; on a finished one it has nothing left to do (as `train`)."""
    from dataclasses import fields

    from bertviz_lab.bert.device import resolve_device
    from bertviz_lab.finetune import runs as ft_runs
    from bertviz_lab.finetune.config import FinetuneConfig
    from bertviz_lab.pretrain import process

    process.check_settings(ft_runs.KIND)  # a bad BERTVIZ_THREADS: one sentence before any folder, as `train`
    run_dir = Path(args.run_dir)
    cfg = None
    if args.resume:
        given = [flag_of(f.name) for f in fields(FinetuneConfig) if getattr(args, f.name) != f.default]
        if given:
            raise ConfigError(f"--resume continues the run with the settings it recorded; drop {given[0]}")
        if not (run_dir / "run.json").is_file():  # refused before the lock writes anything into the folder
            raise ConfigError(f"{run_dir} is not a run folder that can be resumed")
    else:
        process.refuse_used(run_dir)
        cfg = config_of(args)
        resolve_device(cfg.device)  # --device cuda on a machine without one: refused before the folder is made
        ft_runs.check(cfg)
    process.tune_allocator()
    return process.execute(run_dir, cfg, args.resume, args.argv, job=ft_runs.FINETUNE)


def cmd_classify(args) -> int:
    from bertviz_lab.views.finetune.classifier import classify

    if not args.text.strip():
        raise InputError("the text is empty")
    text_b = args.text_b if args.text_b is not None and args.text_b.strip() else None  # "" means one sentence
    ckpt = load(args)
    result = classify(ckpt.model, ckpt.tokenizer, args.text, text_b)
    labels = list(result.labels)
    if result.token_level:
        rows = [{"token": result.tokens[position], "predicted": labels[int(probs.argmax())],
                 "probs": probs.tolist(), "logits": logits.tolist()}
                for position, probs, logits in zip(result.rows, result.probs, result.logits)]
        if args.json:
            print(json.dumps({"labels": labels, "tokens": rows}, indent=2, ensure_ascii=False))
            return 0
        tokens, tags = ([printable(row[key])[:30] for row in rows] for key in ("token", "predicted"))
        width, tag_width = max(map(len, tokens + ["token"])), max(map(len, tags + ["tag"]))
        print(f"{'token':<{width}}  {'tag':<{tag_width}}  prob")
        for token, tag, row in zip(tokens, tags, rows):
            print(f"{token:<{width}}  {tag:<{tag_width}}  {max(row['probs']):.4f}")
        return 0
    probs, logits = result.probs.tolist(), result.logits.tolist()
    predicted = labels[int(result.probs.argmax())]
    if args.json:
        print(json.dumps({"labels": labels, "predicted": predicted, "probs": probs, "logits": logits},
                         indent=2, ensure_ascii=False))
        return 0
    names = [printable(label)[:30] for label in labels]
    width = max(map(len, names + ["label"]))
    print(f"{'label':<{width}}  {'prob':>6}")
    for name, p in zip(names, probs):
        print(f"{name:<{width}}  {p:6.4f}  {'#' * round(BAR * p)}")
    print(f"predicted: {printable(predicted)[:30]}")
    return 0


COMMANDS = {"finetune": cmd_finetune, "classify": cmd_classify}
