"""Evidence over a corpus, not one sentence: which heads follow which dependency relation (Clark et al. 2019),
where a head puts its weight across the sentence bank (exBERT's corpus search), a structural probe that finds
parse trees as distances between word vectors (Hewitt & Manning 2019), and subject-verb agreement across
attractors (Linzen et al. 2016; Goldberg 2019). The gold trees come from the story world (corpus/trees.py) or
a CoNLL-U treebank (treebank.py)."""
