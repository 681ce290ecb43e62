import re, collections, time, sys
from bertviz_lab.corpus import generate_documents, vocabulary
V = set(vocabulary())
print("vocab", len(V))
worst = collections.Counter()
for seed in range(int(sys.argv[1])):
    for n in (2000, 3000, 4000):
        docs = generate_documents(n, seed)
        seen = set(t for d in docs for s in d for t in re.findall(r"[a-z]+", s))
        missing = sorted(V - seen)
        if n == 4000: worst.update(missing)
        print(seed, n, "missing", len(missing), missing[:40], "outside", sorted(seen - V)[:20])
print(worst.most_common(40))
