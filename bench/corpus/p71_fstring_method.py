import torch


def f(x):
    msg = f"sum={x.sum()}"
    if msg.startswith("sum"):
        return x + 1
    return x
