import os

import torch


def f(x):
    if os.environ.get("DOUBLE") == "1":
        return x * 2
    return x
