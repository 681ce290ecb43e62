"""The `patch` command: where is the answer made? Activation patching between a clean and a corrupted run of one
sentence (views/patching/runs.py records both runs and patches between them; explain/patch_grids.py holds the grids),
as aligned tables with sentences and checks, as JSON, or as a CSV file."""

from __future__ import annotations

import argparse
import csv
import json
import re
import textwrap

from bertviz_lab.cli.common import CHECKPOINT_HELP, load, printable
from bertviz_lab.cli.explain import Bar
from bertviz_lab.errors import InputError

WHATS = {"resid": ("resid",), "blocks": ("attn", "mlp"), "heads": ("heads",), "head": ("qkv",)}
DIRECTIONS = {"denoise": ("denoise",), "noise": ("noise",), "both": ("denoise", "noise")}
HEAD = re.compile(r"(\d+)\.(\d+)")

DESCRIPTION = """\
Activation patching (causal tracing) on a [MASK]: run a clean sentence and a corrupted one of the same length in
tokens (one word changed), copy one activation from one run into the other, and measure how much of the answer moves
with it. The score F is logit(answer) - logit(foil) at the [MASK] (default answer: the clean run's top guess; default
foil: the corrupted run's top guess other than the answer), normalised so the corrupted run is 0 and the clean run 1.

--what picks the grid: resid, the residual stream (the embeddings and every layer's output) x every position;
blocks, each layer's attention block and feed-forward block (their output before the residual add and LayerNorm)
x every position; heads, every head's output (before W_O) x layer; head L.H, that head's query, key and value
vectors patched apart, position by position (layer and head counted from 1, as people count: 2.3 is layer 2's
third head). --direction: denoise (clean into corrupted: is this activation enough to bring the answer back?),
noise (corrupted into clean: does the answer need it?) or both.

--noise corrupts by Gaussian noise of 3x the word vectors' standard deviation (Meng et al. 2022) on the tokens
--noised names (from 0, as the table counts them; default: where --corrupt differs), --draws seeded draws
averaged; without --corrupt the clean sentence is the only one.

Without --json: both runs' scores and top guesses, each grid as a table (2 decimals), what it says in sentences
written from its numbers, and for the residual grid the checks (every position patched gives the clean score,
nothing patched the corrupted one, both runs read as Mask & predict reads them) with PASS or FAIL. With --json:
{"clean", "corrupt", "tokens", "position", "answer", "foil", "metric", "noised", "draws", "seed", "runs":
{"clean": {"F", "p_answer", "top"}, "corrupted": {...}}, "grids": [{"kind", "direction", "head", "rows",
"columns", "values", "F", "sentences", "checks": [{"name", "passed", "detail"}]}], "limits"}, every number exact.
--csv FILE writes one row per cell of every grid. A mistake in the input: one line on stderr, exit status 2."""


def add_parser(sub) -> None:
    patch = sub.add_parser("patch", help="where is the answer made? activation patching between a clean and a "
                                         "corrupted sentence, layer by layer, position by position, head by head",
                           description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    patch.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    patch.add_argument("--clean", required=True, metavar="TEXT",
                       help='the clean sentence, with a [MASK]: "the keys to the cabinet [MASK] on the table ."')
    patch.add_argument("--corrupt", metavar="TEXT", help="the same sentence with one word changed, as many tokens "
                                                         "long: \"the key to the cabinet [MASK] on the table .\"")
    patch.add_argument("--answer", metavar="W", help="the word the clean sentence should make (default: its top "
                                                     "guess); one token of the vocabulary")
    patch.add_argument("--foil", metavar="W", help="the word the corrupted sentence should make (default: its top "
                                                   "guess other than the answer)")
    patch.add_argument("--what", nargs="+", default=["resid"], metavar="GRID",
                       help="resid (default), blocks, heads, or head L.H (a head counted from 1: head 2.3)")
    patch.add_argument("--direction", default="both", metavar="D",
                       help="denoise (clean into corrupted), noise (corrupted into clean) or both (default)")
    patch.add_argument("--noise", action="store_true", help="corrupt by Gaussian noise on some tokens' word vectors")
    patch.add_argument("--noised", nargs="+", type=int, default=[], metavar="I",
                       help="with --noise: the token positions noised, from 0 (default: where --corrupt differs)")
    patch.add_argument("--draws", type=int, metavar="N", help="with --noise: draws averaged (default 10)")
    patch.add_argument("--seed", type=int, metavar="S", help="with --noise: the draws' seed (default 0)")
    patch.add_argument("--device", default="auto", help="auto, cpu or cuda")
    patch.add_argument("--json", action="store_true", help="print JSON instead of tables")
    patch.add_argument("--csv", metavar="FILE", help="also write every cell of every grid to this CSV file")


def asked_grids(what: list[str], direction: str) -> tuple[list[str], tuple[int, int] | None, tuple[str, ...]]:
    """(the grid kinds, the head (layer, head) from 0 or None, the directions) the options name."""
    name, *rest = what
    if name not in WHATS or (name == "head") != bool(rest) or len(rest) > 1:
        raise InputError(f"--what takes resid, blocks, heads or head L.H (a head counted from 1, e.g. head 2.3), "
                         f"got {' '.join(what)!r}")
    if direction not in DIRECTIONS:
        raise InputError(f"--direction takes denoise, noise or both, got {direction!r}")
    head = None
    if rest:
        found = HEAD.fullmatch(rest[0])
        head = (int(found.group(1)) - 1, int(found.group(2)) - 1) if found else (-1, -1)
        if min(head) < 0:
            raise InputError(f"a head is its layer and its number, each counted from 1, as in head 2.3 (layer 2, "
                             f"its third head), got {rest[0]!r}")
    return list(WHATS[name]), head, DIRECTIONS[direction]


def _ask(args):
    from bertviz_lab.views.patching.ask import DRAWS, PatchAsk

    if args.corrupt is None and not args.noise:
        raise InputError("give the corrupted sentence with --corrupt (the clean one with one word changed, as many "
                         "tokens long), or corrupt the clean one with --noise")
    if not args.noise and (args.noised or args.draws is not None or args.seed is not None):
        raise InputError("--noised, --draws and --seed are for --noise: add --noise to corrupt by noise")
    return PatchAsk(args.clean, args.corrupt or "", args.answer or "", args.foil or "", noise=args.noise,
                    noised=tuple(args.noised), draws=DRAWS if args.draws is None else args.draws,
                    seed=args.seed or 0)


def _check_head(head: tuple[int, int] | None, config) -> None:
    """A head the model lacks is said before anything runs."""
    if head is not None and not (head[0] < config.num_hidden_layers and head[1] < config.num_attention_heads):
        raise InputError(f"there is no head {head[0] + 1}.{head[1] + 1}: this model has {config.num_hidden_layers} "
                         f"layers of {config.num_attention_heads} heads (counted from 1)")


def cmd_patch(args) -> int:
    from bertviz_lab.views.patching import runs as vpa

    kinds, head, directions = asked_grids(args.what, args.direction)
    ask = _ask(args)
    ckpt = load(args)
    _check_head(head, ckpt.config)
    patching = vpa.prepare(ckpt.model, ckpt.tokenizer, ask)
    grids = []
    with Bar("patch") as bar:
        for kind in kinds:
            for direction in directions:
                grids.append(vpa.grid(patching, kind, direction, head if kind == "qkv" else None, progress=bar))
    if args.csv:
        write_csv(args.csv, patching, grids)
    if args.json:
        print(json.dumps(json_report(patching, grids), indent=2, ensure_ascii=False))
    else:
        print("\n".join(report_lines(patching, grids)))
    return 0


def columns(patching, grid) -> list[str]:
    """The grid's columns by name: the tokens, or "head 1", "head 2", ..."""
    if grid.kind == "heads":
        return [f"head {h + 1}" for h in range(grid.values.shape[1])]
    return list(patching.tokens)


def _checks(patching, grid) -> list:
    from bertviz_lab.views.patching import reading as vpa_read

    return vpa_read.checks(patching, grid) if grid.kind == "resid" else []


def _runs(patching) -> dict:
    traced = patching.traced
    return {"clean": {"F": patching.f_clean, "p_answer": traced.p_clean, "top": patching.tops[0] or None},
            "corrupted": {"F": patching.f_corrupt, "p_answer": traced.p_corrupt, "top": patching.tops[1] or None}}


def json_report(patching, grids) -> dict:
    """Everything the text shows, with exact values."""
    from bertviz_lab.views.patching import reading as vpa_read

    ask = patching.ask
    return {"clean": ask.clean, "corrupt": ask.corrupt or None, "tokens": list(patching.tokens),
            "position": patching.position, "answer": patching.answer or None, "foil": patching.foil or None,
            "metric": patching.metric, "noised": list(patching.noised), "draws": ask.draws if ask.noise else None,
            "seed": ask.seed if ask.noise else None, "runs": _runs(patching),
            "grids": [{"kind": g.kind, "direction": g.direction, "head": None if g.head is None else
                       f"{g.head[0] + 1}.{g.head[1] + 1}", "rows": list(g.rows), "columns": columns(patching, g),
                       "values": g.values.tolist(), "F": g.f.tolist(), "sentences": vpa_read.sentences(patching, g),
                       "checks": [{"name": c.name, "passed": bool(c.passed), "detail": c.detail}
                                  for c in _checks(patching, g)]}
                      for g in grids],
            "limits": vpa_read.LIMITS}


def _heading(patching) -> list[str]:
    runs = _runs(patching)
    answer = printable(patching.answer) if patching.answer else "replaced"
    lines = [f"F = {printable(patching.metric)} at token {patching.position} "
             f"({printable(patching.tokens[patching.position])})"]
    noised = f" (noise on tokens {', '.join(map(str, patching.noised))}, {patching.ask.draws} draws, seed " \
             f"{patching.ask.seed}: the mean)" if patching.noised else ""
    for label, run in (("clean", runs["clean"]), ("corrupted" + noised, runs["corrupted"])):
        top = f"; top guess: {printable(run['top'])}" if run["top"] else ""
        lines.append(f"  {label}: F = {run['F']:.4f}, p({answer}) = {run['p_answer']:.4f}{top}")
    return lines


def table(patching, grid) -> list[str]:
    """The grid, rows x columns, aligned, values to 2 decimals."""
    cols = [printable(c) for c in columns(patching, grid)]
    if grid.kind != "heads":
        cols = [f"{i} {c}" for i, c in enumerate(cols)]
    first = max(map(len, grid.rows))
    widths = [max(len(c), 5) for c in cols]
    lines = [" " * first + "".join(f"  {c:>{w}}" for c, w in zip(cols, widths))]
    for name, row in zip(grid.rows, grid.values):
        # round first, so that -0.001 prints as 0.00 and not -0.00
        lines.append(f"{name:<{first}}" + "".join(f"  {round(v, 2) + 0.0:>{w}.2f}" for v, w in zip(row, widths)))
    return lines


def report_lines(patching, grids) -> list[str]:
    """The readable report: both runs, then each grid with its table, its sentences and its checks."""
    from bertviz_lab.views.patching import reading as vpa_read

    lines = _heading(patching)
    for g in grids:
        head = f"head {g.head[0] + 1}.{g.head[1] + 1}: " if g.head is not None else ""
        lines += ["", *_wrapped(f"{head}{vpa_read.KIND_WORDS[g.kind]}"),
                  *_wrapped(vpa_read.DIRECTION_WORDS[g.direction]), "", *table(patching, g), ""]
        lines += [line for sentence in vpa_read.sentences(patching, g) for line in _wrapped(sentence)]
        lines += [line for c in _checks(patching, g)
                  for line in _wrapped(f"{'PASS' if c.passed else 'FAIL'}  {c.name}: {c.detail}", "  ")]
    return [*lines, "", *_wrapped(vpa_read.LIMITS)]


def _wrapped(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, 116, initial_indent=indent, subsequent_indent=indent + "      " if indent else "",
                         break_on_hyphens=False)


def write_csv(path: str, patching, grids) -> None:
    from bertviz_lab.views.patching import reading as vpa_read

    rows = [{**row, "head": f"{g.head[0] + 1}.{g.head[1] + 1}" if g.head is not None else ""}
            for g in grids for row in vpa_read.rows(patching, g)]
    try:
        with open(path, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    except OSError as exc:
        raise InputError(f"cannot write the CSV file {path}: {exc.strerror or exc}") from None



COMMANDS = {"patch": cmd_patch}
