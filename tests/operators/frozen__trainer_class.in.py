import torch
import torch.nn.functional as F
from torch import nn


class TextClassifier(nn.Module):
    """Token embeddings, a GRU, and a linear read-out of the last hidden state."""

    def __init__(self, vocab: int, dim: int = 64, classes: int = 3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, classes)  # logits

    def forward(self, tokens):
        states, _ = self.rnn(self.embed(tokens))
        return self.out(states[:, -1])


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

    def train_step(self, tokens, labels):
        self.model.train()
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(tokens), labels)
        loss.backward()
        self.optimizer.step()
        return loss.item()
