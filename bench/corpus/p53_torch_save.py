import io

import torch


def f(x):
    buf = io.BytesIO()
    torch.save(x, buf)
    return x + 1
