import torch


def f(x):
    counts = x.long().abs() % 3
    r = torch.repeat_interleave(x, counts)
    return r.sum() + x
