import torch
import torch.nn.functional as F


class Ranker(torch.nn.Module):
    """Scores each (query, item) pair; trained with a pointwise squared error on graded relevance."""

    def __init__(self, dim):
        super().__init__()
        self.bilinear = torch.nn.Bilinear(dim, dim, 1)

    def forward(self, query, item):
        return torch.tanh(self.bilinear(query, item)).flatten(), F.normalize(query, dim=-1)


def train(ranker, batches, opt):
    for query, item, grade in batches:
        score, _ = ranker(query, item)
        loss = ((score - grade) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
