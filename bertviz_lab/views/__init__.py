"""What each page shows, as plain records (numpy arrays, DataFrames, dataclasses of numbers):
inputs.py (text -> encoding -> one forward), predict.py (Mask & predict), attention.py, losses.py
(Losses step by step), worked.py (Worked examples), probe.py and pretrain.py (Pretrain live).
No Streamlit here: pages draw these records with figures/ and ui/."""
