"""Command line: `python -m bertviz_lab predict|similarity|lens|info|train|publish|runs ...`.

predict     top-k guesses for each [MASK] of a sentence (or a pair), as a table or JSON
similarity  one word's vectors in several sentences: their cosine matrix at every layer
lens        the logit lens: the MLM head's top-k at each [MASK] after every layer
info        a checkpoint's shape and model card
train       pretrain a BERT into a run folder (the same command the app starts; works under torchrun)
publish     evaluate a run's last checkpoint and copy it, with a model card, to a folder the app lists
runs        list, stop, resume or delete the runs under $BERTVIZ_RUNS (default runs/): the functions
            the Pretrain page's buttons call

It sits on views/ and pretrain/ and imports them lazily, so `--help` is instant. User
mistakes print one line on stderr and exit with status 2; nothing a user types should
produce a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bertviz_lab.errors import InputError, LabError

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bertviz_lab", description="Watch BERT work.")
    sub = parser.add_subparsers(dest="command", required=True)
    predict = sub.add_parser("predict", help="top-k guesses for each [MASK] in a sentence")
    predict.add_argument("--checkpoint", required=True, help="model folder (Hugging Face layout)")
    predict.add_argument("--top-k", type=int, default=5)
    predict.add_argument("--json", action="store_true", help="print JSON instead of a table")
    predict.add_argument("--device", default="auto", help="auto, cpu or cuda")
    predict.add_argument("text", help='sentence with [MASK], e.g. "the cat sat on the [MASK] ."')
    predict.add_argument("text_b", nargs="?", default=None, help="optional second sentence (segment B)")
    add_representation_parsers(sub)
    add_train_parser(sub)
    publish = sub.add_parser("publish", help="evaluate a run's last checkpoint and ship it with a model card")
    publish.add_argument("--run-dir", required=True)
    publish.add_argument("--to", required=True, help="target folder, e.g. checkpoints/NAME")
    publish.add_argument("--eval-batches", type=int, default=32)
    info = sub.add_parser("info", help="the model card of a checkpoint")
    info.add_argument("--checkpoint", required=True)
    info.add_argument("--json", action="store_true")
    add_runs_parser(sub)
    return parser


def add_representation_parsers(sub) -> None:
    similarity = sub.add_parser("similarity", help="cosine matrix of one word's vectors across sentences, per layer")
    similarity.add_argument("--word", required=True, help="the word to follow, e.g. bank")
    similarity.add_argument("sentences", nargs="*", help="two or more sentences that contain the word")
    lens = sub.add_parser("lens", help="the MLM head's top-k at each [MASK] after every layer (logit lens)")
    lens.add_argument("--top-k", type=int, default=5, help="1 to the vocabulary size (default: 5)")
    lens.add_argument("text", help='sentence with [MASK], e.g. "the cat sat on the [MASK] ."')
    for command in (similarity, lens):
        command.add_argument("--checkpoint", required=True, help="model folder (Hugging Face layout)")
        command.add_argument("--json", action="store_true", help="print JSON instead of a table")
        command.add_argument("--device", default="auto", help="auto, cpu or cuda")


def add_runs_parser(sub) -> None:
    runs = sub.add_parser("runs", help="list, stop, resume or delete pretraining runs")
    action = runs.add_subparsers(dest="action", required=True)
    listing = action.add_parser("list", help="every run: status, steps, who started it")
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

    from bertviz_lab.pretrain.config import RANDOM_TOKENS, TrainConfig

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
            train.add_argument(flag, choices=RANDOM_TOKENS, default=default,
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
    if not args.resume:
        cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
        resources.check_corpus(cfg)
        resources.check_resources(cfg)
    process.tune_allocator()
    with distributed.session(cfg.device if cfg else "auto"):
        return process.execute(args.run_dir, cfg, args.resume, sys.argv[1:])


RUN_TABLE = "{name:<30} {status:<11} {steps:>15}  {started_by:<24} {message}"  # `runs list`


def cmd_runs(args) -> int:
    from bertviz_lab.pretrain import runs

    if args.action == "list":
        rows = [{"name": r.name, "status": r.status, "step": r.step, "total_steps": r.total_steps,
                 "started_by": r.started_by, "message": r.message, "created": r.created,
                 "checkpoint": str(r.checkpoint) if r.checkpoint else None} for r in runs.list_runs()]
        if args.json:
            print(json.dumps(rows, indent=2))
        elif not rows:
            print(f"no runs in {runs.runs_root()}")
        else:
            print(RUN_TABLE.format(name="run", status="status", steps="steps", started_by="started by",
                                   message="message"))
            for row in rows:
                fields = {k: _one_line(v)[:30] for k, v in row.items()}
                print(RUN_TABLE.format(**{**fields, "steps": f"{row['step']:,} / {row['total_steps']:,}",
                                          "message": _one_line(row["message"])[:200]}))
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


def _one_line(value) -> str:
    """No newlines or terminal control codes from a run's files reach the terminal."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())


def cmd_publish(args) -> int:
    from bertviz_lab.pretrain.publish import publish

    card = publish(args.run_dir, args.to, args.eval_batches)
    print(json.dumps(card["held_out"], indent=2))
    return 0


def _load(args):
    """The checkpoint of `--checkpoint`, on the device of `--device`."""
    from bertviz_lab.bert.checkpoint import load_checkpoint
    from bertviz_lab.bert.device import resolve_device

    return load_checkpoint(args.checkpoint, device=resolve_device(args.device))


def cmd_predict(args) -> int:
    from bertviz_lab.views import inputs, predict

    ckpt = _load(args)
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, args.text, args.text_b, allow_truncation=False)
    prediction = predict.predict_masks(ckpt.model, ckpt.tokenizer, encoding, top_k=args.top_k)
    if args.json:
        print(json.dumps({"tokens": encoding.tokens, "filled": prediction.filled, "masks": [
            {"position": m.position, "entropy": m.entropy,
             "candidates": [{"token": c.token, "id": c.id, "prob": c.prob} for c in m.candidates]}
            for m in prediction.masks]}, indent=2, ensure_ascii=False))
        return 0
    for n, mask in enumerate(prediction.masks, 1):
        print(f"[MASK] #{n} at token {mask.position} (entropy {mask.entropy:.3f} nats)")
        for c in mask.candidates:
            print(f"  {c.token:<16} {c.prob:8.4f}  {'#' * round(40 * c.prob)}")
    print("filled:", " ".join(t for t in prediction.filled if t not in ("[CLS]", "[SEP]")))
    return 0


def cmd_similarity(args) -> int:
    from bertviz_lab.views import representations

    blank = [n for n, text in enumerate(args.sentences, 1) if not text.strip()]
    if blank:  # the view skips blank lines, which would shift the numbers its messages and output use
        raise InputError(f"sentence {blank[0]} is empty")
    ckpt = _load(args)
    wic = representations.word_in_context(ckpt.model, ckpt.tokenizer, args.word, args.sentences)
    sims = representations.cosines(wic.vectors)  # (L + 1, S, S)
    if args.json:
        print(json.dumps({"word": wic.word, "sentences": list(wic.sentences), "layers": sims.tolist()},
                         indent=2, ensure_ascii=False))
        return 0
    if len(wic.pieces) > 1:
        print(f"{_one_line(wic.word)!r} is {len(wic.pieces)} word pieces ({_printable(' '.join(wic.pieces))}): "
              "its vector is their mean")
    for n, text in enumerate(wic.sentences, 1):
        print(f"{n:>4}. {_one_line(text)}")
    for layer, matrix in enumerate(sims):
        print(f"\nlayer {layer}{' (embeddings)' if layer == 0 else ''}")
        print("    " + "".join(f"{n:>7}" for n in range(1, len(matrix) + 1)))
        for n, row in enumerate(matrix, 1):
            print(f"{n:>4}" + "".join(f"{value:7.3f}" for value in row))
    return 0


def cmd_lens(args) -> int:
    """--top-k outside 1..vocabulary size is an error (as for `predict`), not silently clamped."""
    from bertviz_lab.views import inputs, representations

    ckpt = _load(args)
    tokenizer = ckpt.tokenizer
    if not 1 <= args.top_k <= tokenizer.vocab_size:
        raise InputError(f"top-k must be between 1 and {tokenizer.vocab_size}, got {args.top_k}")
    encoding = inputs.encode(tokenizer, ckpt.model, args.text, allow_truncation=False)
    lens = representations.logit_lens(ckpt.model, encoding, tokenizer.mask_id)
    tops = [[[(tokenizer.id_to_token(i), p) for i, p in mask.top(layer, args.top_k)]
             for layer in range(mask.probs.shape[0])] for mask in lens.masks]
    if args.json:
        print(json.dumps({"tokens": lens.tokens, "masks": [
            {"position": mask.position, "layers": [[{"token": t, "prob": p} for t, p in top] for top in layers]}
            for mask, layers in zip(lens.masks, tops)]}, indent=2, ensure_ascii=False))
        return 0
    for n, (mask, layers) in enumerate(zip(lens.masks, tops), 1):
        print(f"[MASK] #{n} at token {mask.position}")
        for layer, top in enumerate(layers):
            label = "layer 0 (embeddings)" if layer == 0 else f"layer {layer}"
            print(f"  {label:<21}" + "  ".join(f"{_printable(t)} {p:.4f}" for t, p in top))
    return 0


def model_card(ckpt) -> dict:
    cfg, model = ckpt.config, ckpt.model
    return {
        "path": str(ckpt.path), "architecture": model.architecture,
        "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads, "hidden_size": cfg.hidden_size,
        "head_dim": cfg.head_dim, "intermediate_size": cfg.intermediate_size, "activation": cfg.hidden_act,
        "max_tokens": cfg.max_position_embeddings, "vocab_size": ckpt.tokenizer.vocab_size,
        "parameters": model.num_parameters(), "mlm_head": model.has_mlm, "nsp_head": model.has_nsp,
        **({"training": ckpt.card} if ckpt.card else {}),
    }


def cmd_info(args) -> int:
    from bertviz_lab.bert.checkpoint import load_checkpoint

    card = model_card(load_checkpoint(args.checkpoint))
    if args.json:
        print(json.dumps(card, indent=2))
        return 0
    for key, value in card.items():
        if key == "training":
            for k, v in value.items():  # the card is data: escape codes in it never reach the terminal
                print(f"{_printable('training.' + str(k)):<22} {_printable(v)}")
        else:
            print(f"{key:<22} {f'{value:,}' if key == 'parameters' else value}")
    return 0


def _printable(value) -> str:
    """A card value on one line with no control characters (JSON for anything but plain text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "".join(c if c.isprintable() else "?" for c in text)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"predict": cmd_predict, "similarity": cmd_similarity, "lens": cmd_lens, "info": cmd_info,
                "train": cmd_train, "publish": cmd_publish, "runs": cmd_runs}[args.command](args)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `... | head` stopped reading: stop quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush fails silently
        return 0
