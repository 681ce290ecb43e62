"""What each page shows, as plain records (numpy arrays, DataFrames, dataclasses of numbers):
inputs.py (text -> encoding -> one forward), predict.py (Mask & predict), attention.py and layer.py
(Attention: the heads, then the rest of the layer), losses.py and masking_stats.py (Losses step by
step), worked.py and onehot.py (Worked examples), sizes.py (the BERT family's sizes, on Home),
probe.py and pretrain.py (Pretrain live).
No Streamlit here: pages draw these records with figures/ and ui/."""
