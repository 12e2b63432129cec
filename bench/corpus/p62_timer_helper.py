import time

import torch


def elapsed(start):
    return time.perf_counter() - start


def f(x):
    t0 = time.perf_counter()
    y = x * 2
    return y + elapsed(t0)
