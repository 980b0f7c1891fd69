"""The model zoo: the field's scientific-ML model families as CTF baselines, each from the
library that implements it (`family`: what a zoo model is; `predict`: one pair's prediction)."""
