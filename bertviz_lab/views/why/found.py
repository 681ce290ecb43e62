"""The sentences where last-layer attention and occlusion disagree most on the shipped model, found by
`python -m bench.why_disagree` (views/why/examples.py reads them). Written by that script: run it again to
regenerate this file, never edit it by hand."""

SEARCH = {'date': '2026-12-01', 'sentences': 300, 'seed': 0, 'min_words': 6, 'median_rho': 0.11515151515151516}
FOUND = (
    {'text': 'they [MASK] into the garden yesterday .', 'kind': 'verb', 'word': 'raced',
     'target': 'buzzed', 'rho': -1.0,
     'note': "attention's top word: yesterday; occlusion's: garden"},
    {'text': 'the father turned on [MASK] flashlight .', 'kind': 'pronoun', 'word': 'his',
     'target': 'his', 'rho': -0.8285714285714286,
     'note': "attention's top word: .; occlusion's: flashlight"},
    {'text': 'the puppy was too sleepy to [MASK] .', 'kind': 'verb', 'word': 'play',
     'target': 'play', 'rho': -0.7857142857142857,
     'note': "attention's top word: too; occlusion's: to"},
    {'text': 'how much money did [MASK] earn ?', 'kind': 'noun', 'word': 'sofia',
     'target': 'he', 'rho': -0.7714285714285715,
     'note': "attention's top word: ?; occlusion's: did"},
    {'text': 'it is yawning in the [MASK] .', 'kind': 'noun', 'word': 'attic',
     'target': 'bedroom', 'rho': -0.7714285714285715,
     'note': "attention's top word: yawning; occlusion's: in"},
)
