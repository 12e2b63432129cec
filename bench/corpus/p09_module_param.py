import torch


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        if self.weight.sum() > 4:
            return x * self.weight
        return x


gate = Gate()


def f(x):
    return gate(x)
