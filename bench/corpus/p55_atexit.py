import atexit

import torch


def report():
    pass


def f(x):
    atexit.register(report)
    return x + 1
