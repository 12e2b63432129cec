import uuid

import torch


def f(x):
    tag = uuid.uuid4()
    return x + len(str(tag))
