import math

import torch


def f(x):
    y = torch.clamp(x, min=-math.pi, max=math.pi)
    return y.sin()
