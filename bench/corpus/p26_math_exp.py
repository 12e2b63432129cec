import math

import torch


def f(x):
    return x * math.exp(x.mean())
