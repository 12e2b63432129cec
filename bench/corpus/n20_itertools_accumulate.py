import itertools

import torch


def f(x):
    parts = list(itertools.accumulate(x))
    return x + parts[-1]
