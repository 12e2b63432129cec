import torch


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.proj(x)
        if y.norm() > 10:
            y = y / y.norm()
        return y


norm = Norm()


def f(x):
    return norm(x)
