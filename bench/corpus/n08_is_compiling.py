import torch


def f(x):
    if not torch.compiler.is_compiling():
        print("eager only")
    return x + 1
