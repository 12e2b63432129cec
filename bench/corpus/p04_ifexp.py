import torch


def f(x):
    scale = 2.0 if x.mean() > 0 else 0.5
    return x * scale
