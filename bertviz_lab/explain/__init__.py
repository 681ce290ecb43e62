"""Why this guess: which tokens made BERT guess what it guessed, by nine methods, and a test of which to believe; and
where inside the model the answer is made (activation patching).

score.py says what is explained (F: a target's logit at a [MASK], minus a contrast's; or ELECTRA's replaced-token
logit), methods.py computes each method (attention, rollout, flow, value-weighted norms, gradients, integrated
gradients with Captum, occlusion; value zeroing (Mohebbi et al. 2023) reads how the layers mix the tokens; the four
read from attention and value zeroing never read F, so they are the same for any target or contrast), rank.py ranks
(ties, Spearman's rho and its permutation p-value), checks.py compares the methods (agreement) and tests them
(deletion curves against random orders), report.py runs them all on one input. patching.py and patch_grids.py patch
activations between a clean and a corrupted run (and zero values, for value zeroing).
"""
