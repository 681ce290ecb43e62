"""The commands around pretraining runs: train, publish, and runs (list, stop, resume, delete), which
lists and manages fine-tuning runs too."""

from __future__ import annotations

import argparse
import json
import sys

from bertviz_lab.cli.common import EXIT_USAGE, absolute, one_line


def add_publish_parser(sub) -> None:
    publish = sub.add_parser("publish", help="evaluate a run's last checkpoint and ship it with a model card")
    publish.add_argument("--run-dir", required=True)
    publish.add_argument("--to", required=True, help="target folder, e.g. checkpoints/NAME")
    publish.add_argument("--eval-batches", type=int, default=32)


def add_runs_parser(sub) -> None:
    runs = sub.add_parser("runs", help="list, stop, resume or delete pretraining and fine-tuning runs")
    action = runs.add_subparsers(dest="action", required=True)
    listing = action.add_parser("list", help="every run: kind, status, steps, who started it")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stop = action.add_parser("stop", help="save a checkpoint and stop a training run")
    stop.add_argument("--wait", type=float, default=30.0, help="seconds to wait for it to stop (default: 30)")
    action.add_parser("resume", help="continue a stopped, failed or diverged run from its last checkpoint")
    action.add_parser("delete", help="remove a run that is not training, and its uploaded text")
    for name in ("stop", "resume", "delete"):
        action.choices[name].add_argument("name", help="the run's name (see `runs list`)")


def add_train_parser(sub) -> None:
    """One flag per TrainConfig field, so the CLI, the app and the API share one set of settings."""
    from dataclasses import fields

    from bertviz_lab.bert.config import RANDOM_TOKENS
    from bertviz_lab.pretrain.config import TrainConfig

    train = sub.add_parser("train", help="pretrain a BERT (MLM + NSP); works under torchrun too")
    train.add_argument("--run-dir", required=True, help="folder for config, metrics, status, checkpoints")
    train.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
    defaults = TrainConfig()
    for f in fields(TrainConfig):
        flag, default = "--" + f.name.replace("_", "-"), getattr(defaults, f.name)
        if f.name == "nsp":
            train.add_argument("--no-nsp", dest="nsp", action="store_false", help="MLM only (no NSP head)")
            train.add_argument("--nsp", dest="nsp", action="store_true", help=argparse.SUPPRESS)
            continue
        if f.name == "random_tokens":
            train.add_argument(flag, choices=tuple(RANDOM_TOKENS), default=default,
                               help="where the 10%% random tokens come from: vocabulary = the whole vocabulary, "
                                    f"as BERT; wordpieces = never a special token (default: {default})")
            continue
        kind = {int: int, float: float, str: str}.get(type(default), int)
        train.add_argument(flag, type=kind, default=default, help=f"default: {default}")


def cmd_train(args) -> int:
    from dataclasses import fields

    from bertviz_lab.pretrain import distributed, process, resources
    from bertviz_lab.pretrain.config import TrainConfig

    cfg = None
    process.check_settings(process.PRETRAIN.kind)  # a bad BERTVIZ_THREADS or BERTVIZ_BATCH_CACHE: before any folder
    if not args.resume:
        process.refuse_used(args.run_dir)
        values = {f.name: getattr(args, f.name) for f in fields(TrainConfig)}
        if values["corpus"] != "builtin":
            values["corpus"] = absolute(values["corpus"])
        cfg = TrainConfig(**values)
        resources.check_corpus(cfg)
        resources.check_resources(cfg)
    process.tune_allocator()
    # A resumed run opens its group for the device it was started on: NCCL for a CPU run's tensors would fail.
    with distributed.session(cfg.device if cfg else process.recorded_device(args.run_dir)):
        return process.execute(args.run_dir, cfg, args.resume, args.argv)


RUN_TABLE = "{name:<30} {status:<11} {steps:>15}  {kind:<8} {started_by:<24} {message}"  # `runs list`


def cmd_runs(args) -> int:
    from bertviz_lab.pretrain import runs

    if args.action == "list":
        rows = [{"name": r.name, "kind": r.kind, "status": r.status, "step": r.step, "total_steps": r.total_steps,
                 "started_by": r.started_by, "message": r.message, "created": r.created,
                 "checkpoint": str(r.checkpoint) if r.checkpoint else None} for r in runs.list_runs()]
        if args.json:
            print(json.dumps(rows, indent=2))
        elif not rows:
            print(f"no runs in {runs.runs_root()}")
        else:
            print(RUN_TABLE.format(name="run", kind="kind", status="status", steps="steps",
                                   started_by="started by", message="message"))
            for row in rows:
                fields = {k: one_line(v)[:30] for k, v in row.items()}
                print(RUN_TABLE.format(**{**fields, "steps": f"{row['step']:,} / {row['total_steps']:,}",
                                          "message": one_line(row["message"])[:200]}))
        return 0
    path = runs.find(args.name)
    if args.action == "stop":
        if not runs.stop(path, timeout=args.wait):
            print(f"error: run {args.name!r} is not training ({runs.read(path).status})", file=sys.stderr)
            return EXIT_USAGE
        print(f"{args.name}: {runs.read(path).status}")
    elif args.action == "resume":
        print(f"{args.name}: {runs.resume(path).status}")
    else:
        runs.delete(path)
        print(f"{args.name}: deleted")
    return 0


def cmd_publish(args) -> int:
    from bertviz_lab.errors import ConfigError
    from bertviz_lab.pretrain import runs
    from bertviz_lab.pretrain.publish import publish

    if runs.read(args.run_dir).kind != "pretrain":  # its held-out check is MLM and NSP accuracy
        raise ConfigError(f"{args.run_dir} is a fine-tuning run; publish ships pretrained models. Its checkpoints "
                          "(checkpoints/step-N) are ready to use: classify --checkpoint FOLDER")
    card = publish(args.run_dir, args.to, args.eval_batches)
    print(json.dumps(card["held_out"], indent=2))
    return 0


COMMANDS = {"train": cmd_train, "publish": cmd_publish, "runs": cmd_runs}
