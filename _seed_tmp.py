from bertviz_lab.corpus import StoryGenerator, SEED_SENTENCES
import collections
worst = 0
for seed in range(50):
    g = StoryGenerator(seed); need = set(SEED_SENTENCES); i = 0
    while need:
        i += 1
        need -= set(g.story())
    worst = max(worst, i)
print("worst docs until all seeds seen:", worst)
docs = StoryGenerator(0).stories(50000)
c = collections.Counter(s for d in docs for s in d)
for s in SEED_SENTENCES: print(c[s], s)
import re
print("sat on the:", collections.Counter(re.findall(r"sat on the (\w+)", " ".join(" ".join(d) for d in docs))).most_common(30))
print("went to the X to deposit money:", collections.Counter(re.findall(r"went to the (\w+) to deposit money", " ".join(" ".join(d) for d in docs))))
print("language processing:", collections.Counter(re.findall(r"(\w+) language processing", " ".join(" ".join(d) for d in docs))))
