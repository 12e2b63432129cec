import torch


def f(x):
    class Box:
        pass

    box = Box()
    box.v = x
    return box.v + 1
