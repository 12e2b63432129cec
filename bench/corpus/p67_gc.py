import gc

import torch


def f(x):
    gc.collect()
    return x + 1
