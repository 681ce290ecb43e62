"""What "Inside the feed-forward layer" draws beyond its page file: sections.py (the sentence, One sentence and One
neuron with its corpus), guess.py (Neurons behind the guess, Outlier dimensions)."""
