"""What each page shows, as plain records (numpy arrays, DataFrames, dataclasses of numbers), one folder per feature:
attention/ (every head, the rest of the layer, long inputs), finetune/, lesson/ (the Lesson's steps in one list,
steps.py), losses/, predict/ (Mask & predict), pretrain/ (Pretrain live), representations/, syntax/, timelapse/,
why/ (Why this guess?) and worked/ (Worked examples); under them all inputs.py (text -> encoding -> one forward),
forms.py (new-run forms described once) and sizes.py (the BERT family's sizes, on Home).
No Streamlit here: pages draw these records with figures/ and ui/; the layers inside are pyproject.toml's contract
("views/: lesson -> composite features -> base features -> inputs, forms, sizes")."""
