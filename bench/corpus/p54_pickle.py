import pickle

import torch


def f(x):
    blob = pickle.dumps(x)
    return x + len(blob)
