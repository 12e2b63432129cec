import heapq

import torch


def f(x):
    heap = []
    for v in x:
        heapq.heappush(heap, v)
    return heap[0] + x
