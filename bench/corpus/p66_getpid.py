import os

import torch


def f(x):
    pid = os.getpid()
    return x + pid
