import math

import torch


def f(x):
    n = len(x)
    return x / math.sqrt(float(x.shape[0])) + n
