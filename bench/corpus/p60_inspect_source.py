import inspect

import torch


def f(x):
    src = inspect.getsource(f)
    return x + len(src)
