import hashlib

import torch


def f(x):
    digest = hashlib.sha256(x.numpy().tobytes()).hexdigest()
    return x + len(digest)
