import copy

import torch


def f(x):
    y = copy.deepcopy(x)
    return y + 1
