import re, collections
from bertviz_lab.corpus import generate_documents
from bertviz_lab.corpus.tables import CATEGORIES, VERB
from bertviz_lab.corpus.morph import Noun
sg, pl = set(), set()
for items in CATEGORIES.values():
    for it in items:
        if isinstance(it, Noun):
            if it.pl and it.pl != it.sg:
                sg.add(it.sg); pl.add(it.pl)
amb = sg & pl
sg -= amb; pl -= amb
bases = {v.base for v in VERB.values() if v.base not in (v.ed, v.s)}
past_eq = {v.base for v in VERB.values() if v.base == v.ed}
sforms = {v.s for v in VERB.values()}
ed_only = {v.ed for v in VERB.values() if v.ed != v.base}
docs = generate_documents(20000, 7)
bad = collections.defaultdict(list)
lens = collections.Counter(len(d) for d in docs)
for d in docs:
    for s in d:
        if not re.fullmatch(r"[a-z]+(,? [a-z]+)*[.?]", s): bad["format"].append(s)
        m = re.match(r"the (\w+) (was|were|is|are)\b", s)
        if m:
            n, v = m.groups()
            if n in sg and v in ("were", "are"): bad["sg-were"].append(s)
            if n in pl and v in ("was", "is"): bad["pl-was"].append(s)
        for m in re.finditer(r"\ba ([aeiou]\w*)", s):
            if not m.group(1).startswith(("uni", "use", "usu", "euro", "one")): bad["a-vowel"].append(s)
        for m in re.finditer(r"\ban ([^aeiou ]\w*)", s):
            if not m.group(1).startswith(("hour", "honest")): bad["an-cons"].append(s)
        for m in re.finditer(r"(?:^|, )(he|she|it) (\w+)", s):
            if m.group(2) in bases and m.group(2) not in past_eq: bad["3sg-base"].append(s)
        for m in re.finditer(r"(?:^|, )(i|we|they|you) (\w+)", s):
            if m.group(2) in sforms and m.group(2) not in ("is",): bad["pl-s"].append(s)
        for m in re.finditer(r"\b(did not|will|can|does not|do not|to) (\w+)", s):
            if m.group(2) in ed_only or m.group(2) in sforms and m.group(2) not in bases: bad["aux-form"].append(s)
        if re.search(r"\bi (is|are|was not were)\b|\b(he|she|it) (are|were|am)\b|\b(they|we|you) (is|was|am)\b", s): bad["be"].append(s)
print("lengths", sorted(lens.items()))
for k, v in bad.items():
    print(k, len(v), collections.Counter(v).most_common(8))
