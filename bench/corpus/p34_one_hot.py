import torch


def f(x):
    h = torch.nn.functional.one_hot(x.long().abs())
    return h.sum() + x
