"""Random checkpoints of every BERT-family member, saved by `transformers` with a tokenizer of their kind.

Nothing is downloaded: WordPiece vocabularies are written by hand, byte-level BPE and SentencePiece
Unigram tokenizers are trained here on a few sentences, and the models are random transformers
models (eager attention, biases and LayerNorms randomized so that parity means something).
`build(name, folder)` returns the transformers model and tokenizer, the folder holding both.
"""

from __future__ import annotations

import torch
import transformers
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from tests.helpers.lab import vocab_of_size

TEXTS = ["the cat sat on the mat .", "The Cat sat on the rug , didn't it ?", "i went to the bank to deposit money .",
         "he sat by the river bank .", "natural language processing is unbelievable !", "Über café naïve façade",
         "el gato se sentó en la alfombra .", "le chat était fatigué .", "猫坐在垫子上。", "they love delicious food ."]
MULTILINGUAL = ["über", "café", "naïve", "gato", "chat", "était", "猫", "坐", "在", "垫", "子", "上", "。"]


def _randomize(model, seed: int = 0):
    torch.manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bias" in name or "LayerNorm" in name or "layer_norm" in name:
                p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def _wordpiece(folder, cased: bool = False, multilingual: bool = False):
    words = vocab_of_size(120)
    if cased:
        words += ["The", "Cat", "Über"]
    if multilingual:
        words += MULTILINGUAL
    (folder / "vocab.txt").write_text("".join(w + "\n" for w in words), encoding="utf-8")
    tok = transformers.BertTokenizer(vocab=str(folder / "vocab.txt"), do_lower_case=not cased)
    tok.save_pretrained(folder)
    return tok


def _trained(model, trainer, pre, decoder, normalizer=None) -> Tokenizer:
    tok = Tokenizer(model)
    tok.pre_tokenizer, tok.decoder = pre, decoder
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.train_from_iterator(TEXTS * 3, trainer)
    return tok


def _byte_level_bpe(folder):
    """RoBERTa's kind: byte-level BPE, <s> A </s></s> B </s>, <mask> that eats the space before it."""
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = _trained(models.BPE(), trainers.BpeTrainer(vocab_size=300, special_tokens=specials, show_progress=False,
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
                   pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel())
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    return _fast(tok, folder, bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>",
                 unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")


def _unigram(folder, specials, template, lowercase=False, **names):
    """XLM-R's and ALBERT's kind: a SentencePiece Unigram model (▁ marks a word's start)."""
    tok = _trained(models.Unigram(), trainers.UnigramTrainer(vocab_size=200, special_tokens=specials,
                                                             unk_token=names["unk_token"], show_progress=False),
                   pre_tokenizers.Metaspace(), decoders.Metaspace(),
                   normalizers.Lowercase() if lowercase else None)
    single, pair, ids = template
    tok.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=ids)
    return _fast(tok, folder, **names)


def _fast(tok: Tokenizer, folder, **names):
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **names)
    fast.save_pretrained(folder)
    return fast


def _xlmr_tokenizer(folder):
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    return _unigram(folder, specials, ("<s> $A </s>", "<s> $A </s> </s> $B </s>", [("<s>", 0), ("</s>", 2)]),
                    bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>", unk_token="<unk>",
                    pad_token="<pad>", mask_token="<mask>")


def _albert_tokenizer(folder):
    specials = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    return _unigram(folder, specials, ("[CLS]:0 $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                                       [("[CLS]", 2), ("[SEP]", 3)]), lowercase=True,
                    cls_token="[CLS]", sep_token="[SEP]", unk_token="<unk>", pad_token="<pad>", mask_token="[MASK]")


SMALL = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, hidden_size=32,
             initializer_range=0.1, attn_implementation="eager")


def build(name: str, folder):
    """(transformers model, transformers tokenizer) of family member `name`, both saved in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    t = transformers
    if name.startswith("bert"):
        tok = _wordpiece(folder, cased="cased" in name, multilingual="multilingual" in name)
        act = "gelu_new" if "tanh" in name else "gelu"
        model = t.BertForPreTraining(t.BertConfig(vocab_size=len(tok), max_position_embeddings=40, hidden_act=act,
                                                  **SMALL))
    elif name == "distilbert":
        tok = _wordpiece(folder)
        model = t.DistilBertForMaskedLM(t.DistilBertConfig(
            vocab_size=len(tok), dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=40,
            initializer_range=0.1, attn_implementation="eager"))
    elif name in ("roberta", "xlm-roberta"):
        tok = _byte_level_bpe(folder) if name == "roberta" else _xlmr_tokenizer(folder)
        cls, cfg = ((t.RobertaForMaskedLM, t.RobertaConfig) if name == "roberta" else
                    (t.XLMRobertaForMaskedLM, t.XLMRobertaConfig))
        model = cls(cfg(vocab_size=len(tok), max_position_embeddings=42, type_vocab_size=1, pad_token_id=1,
                        layer_norm_eps=1e-5, **SMALL))
    elif name.startswith("electra"):
        tok = _wordpiece(folder)
        cls = t.ElectraForMaskedLM if name == "electra-generator" else t.ElectraForPreTraining
        model = cls(t.ElectraConfig(vocab_size=len(tok), embedding_size=16, max_position_embeddings=40, **SMALL))
    elif name.startswith("albert"):
        tok = _albert_tokenizer(folder)
        cls = t.AlbertForPreTraining if name == "albert-sop" else t.AlbertForMaskedLM
        model = cls(t.AlbertConfig(vocab_size=len(tok), embedding_size=16, max_position_embeddings=40,
                                   **{**SMALL, "num_hidden_layers": 3}))
    else:
        raise ValueError(name)
    _randomize(model).save_pretrained(folder)
    return model, tok
