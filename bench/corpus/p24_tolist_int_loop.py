import torch


def f(x):
    lens = x.long().abs().tolist()
    out = x
    for n in lens:
        out = out + n
    return out
