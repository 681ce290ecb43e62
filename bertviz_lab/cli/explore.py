"""The commands that look inside a checkpoint: predict, similarity, lens, heads and info."""

from __future__ import annotations

import json

from bertviz_lab.cli.common import CHECKPOINT_HELP, load, one_line, printable
from bertviz_lab.errors import InputError
from bertviz_lab.head_id import HeadId


def add_parsers(sub) -> None:
    predict = sub.add_parser("predict", help="top-k guesses for each [MASK] in a sentence")
    predict.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    predict.add_argument("--top-k", type=int, default=5)
    predict.add_argument("--json", action="store_true", help="print JSON instead of a table")
    predict.add_argument("--device", default="auto", help="auto, cpu or cuda")
    predict.add_argument("text", help='sentence with [MASK], e.g. "the cat sat on the [MASK] ."')
    predict.add_argument("text_b", nargs="?", default=None, help="optional second sentence (segment B)")
    similarity = sub.add_parser("similarity", help="cosine matrix of one word's vectors across sentences, per layer")
    similarity.add_argument("--word", required=True, help="the word to follow, e.g. bank")
    similarity.add_argument("sentences", nargs="*", help="two or more sentences that contain the word")
    lens = sub.add_parser("lens", help="the MLM head's top-k at each [MASK] after every layer (logit lens)")
    lens.add_argument("--top-k", type=int, default=5, help="1 to the vocabulary size (default: 5)")
    lens.add_argument("text", help='sentence with [MASK], e.g. "the cat sat on the [MASK] ."')
    heads = sub.add_parser("heads", help="each head's role scores: attention to the previous, next, same token, "
                                         "[CLS], [SEP], and along grammatical links")
    heads.add_argument("sentences", nargs="*", help="sentences to score (default: the built-in probe set, "
                                                    "which also scores determiner, subject and pronoun links)")
    for command in (similarity, lens, heads):
        command.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
        command.add_argument("--json", action="store_true", help="print JSON instead of a table")
        command.add_argument("--device", default="auto", help="auto, cpu or cuda")
    info = sub.add_parser("info", help="the model card of a checkpoint")
    info.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    info.add_argument("--json", action="store_true")


def cmd_predict(args) -> int:
    from bertviz_lab.views import inputs
    from bertviz_lab.views.predict import guesses as vpr

    ckpt = load(args)
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, args.text, args.text_b, allow_truncation=False)
    prediction = vpr.predict_masks(ckpt.model, ckpt.tokenizer, encoding, top_k=args.top_k)
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
    print("filled:", " ".join(t for t, special in zip(prediction.filled, encoding.special_mask) if not special))
    return 0


def cmd_similarity(args) -> int:
    from bertviz_lab.views.representations import vectors as rv

    blank = [n for n, text in enumerate(args.sentences, 1) if not text.strip()]
    if blank:  # the view skips blank lines, which would shift the numbers its messages and output use
        raise InputError(f"sentence {blank[0]} is empty")
    ckpt = load(args)
    wic = rv.word_in_context(ckpt.model, ckpt.tokenizer, args.word, args.sentences)
    sims = rv.cosines(wic.vectors)  # (L + 1, S, S)
    if args.json:
        print(json.dumps({"word": wic.word, "sentences": list(wic.sentences), "layers": sims.tolist(),
                          "tokens": [list(spelling) for spelling in wic.spellings]}, indent=2, ensure_ascii=False))
        return 0
    if len(set(wic.spellings)) > 1:  # e.g. RoBERTa's "bank" at a sentence's start, "Ġbank" after a space
        print(printable(rv.spelling_note(wic)))
    elif len(wic.pieces) > 1:
        print(f"{one_line(wic.word)!r} is {len(wic.pieces)} word pieces ({printable(' '.join(wic.pieces))}): "
              "its vector is their mean")
    for n, text in enumerate(wic.sentences, 1):
        print(f"{n:>4}. {one_line(text)}")
    for layer, matrix in enumerate(sims):
        print(f"\nlayer {layer}{' (embeddings)' if layer == 0 else ''}")
        print("    " + "".join(f"{n:>7}" for n in range(1, len(matrix) + 1)))
        for n, row in enumerate(matrix, 1):
            print(f"{n:>4}" + "".join(f"{value:7.3f}" for value in row))
    return 0


def cmd_lens(args) -> int:
    """--top-k outside 1..vocabulary size is an error (as for `predict`), not silently clamped."""
    from bertviz_lab.views import inputs
    from bertviz_lab.views.representations import vectors as rv

    ckpt = load(args)
    tokenizer = ckpt.tokenizer
    if not 1 <= args.top_k <= tokenizer.vocab_size:
        raise InputError(f"top-k must be between 1 and {tokenizer.vocab_size}, got {args.top_k}")
    encoding = inputs.encode(tokenizer, ckpt.model, args.text, allow_truncation=False)
    lens = rv.logit_lens(ckpt.model, encoding, tokenizer.mask_id)
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
            print(f"  {label:<21}" + "  ".join(f"{printable(t)} {p:.4f}" for t, p in top))
    return 0


def cmd_heads(args) -> int:
    """Every head's role scores (pretrain/head_roles.py has the definitions); a table per role, or JSON."""
    from bertviz_lab.pretrain.head_roles import ROLE_NAMES, head_roles, twins_note

    blank = [n for n, text in enumerate(args.sentences, 1) if not text.strip()]
    if blank:
        raise InputError(f"sentence {blank[0]} is empty")
    ckpt = load(args)
    roles = head_roles(ckpt.model, ckpt.tokenizer, args.sentences or None)
    if args.json:
        print(json.dumps(roles.to_json(), indent=2, ensure_ascii=False))
        return 0
    print(f"{len(roles.sentences)} sentence{'s' * (len(roles.sentences) != 1)}"
          f"{' (the probe set)' if not args.sentences else ''}: mean attention weight of the word tokens, "
          f"{roles.layers} layers x {roles.heads} heads")
    if roles.twins:
        print(twins_note())
    for role, scores in roles.scores.items():
        layer, head, best = roles.strongest(role)
        twin = roles.twins.get(role)
        same = f"; on the probe set every such link goes to the {ROLE_NAMES[twin]}" if twin else ""
        print(f"\n{role}: to {ROLE_NAMES[role]} (strongest: {HeadId(layer, head).in_words}, {best:.2f}){same}")
        print("         " + "".join(f"{f'head {h}':>8}" for h in range(roles.heads)))
        for layer, row in enumerate(scores):
            print(f"layer {layer:<3}" + "".join(f"{value:8.3f}" for value in row))
    return 0


def model_card(ckpt) -> dict:
    cfg, model = ckpt.config, ckpt.model
    return {
        "path": str(ckpt.path), "family": ckpt.family.title, "tokenizer": ckpt.tokenizer.kind,
        "architecture": model.architecture if cfg.family == "bert" else f"{ckpt.family.title}, read as BERT",
        "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads, "hidden_size": cfg.hidden_size,
        "head_dim": cfg.head_dim, "intermediate_size": cfg.intermediate_size, "activation": cfg.hidden_act,
        "max_tokens": cfg.max_tokens, "vocab_size": ckpt.tokenizer.vocab_size,
        "parameters": model.num_parameters(), "mlm_head": model.has_mlm, "nsp_head": model.has_nsp,
        **({"replaced_token_head": True} if model.has_rtd else {}),
        **({"lacks": ckpt.family.lacks} if ckpt.family.lacks else {}),
        **({"labels": list(model.labels)} if hasattr(model, "labels") else {}),
        **({"training": ckpt.card} if ckpt.card else {}),
    }


def cmd_info(args) -> int:
    card = model_card(load(args))  # on the CPU: info has no --device
    if args.json:
        print(json.dumps(card, indent=2))
        return 0
    for key, value in card.items():
        if key == "training":
            for k, v in value.items():  # the card is data: escape codes in it never reach the terminal
                print(f"{printable('training.' + str(k)):<22} {printable(v)}")
        elif key == "labels":  # from config.json's id2label: data too
            print(f"{key:<22} {printable(', '.join(value))}")
        else:
            print(f"{key:<22} {f'{value:,}' if key == 'parameters' else value}")
    return 0


COMMANDS = {"predict": cmd_predict, "similarity": cmd_similarity, "lens": cmd_lens, "heads": cmd_heads,
            "info": cmd_info}
