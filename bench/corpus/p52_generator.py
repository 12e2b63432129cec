import torch


def f(x):
    g = torch.Generator()
    g.manual_seed(0)
    return x + torch.rand(8, generator=g)
