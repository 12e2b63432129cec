import torch


def f(x):
    keep = x.abs() > 0.1
    kept = x[keep]
    return kept.mean() + x
