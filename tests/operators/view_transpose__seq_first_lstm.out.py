import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab, dim, tags):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim)
        self.out = nn.Linear(dim, tags)

    def forward(self, words):
        x = self.emb(words)
        states, _ = self.lstm(x.view(x.shape[1], x.shape[0], *x.shape[2:]))
        return self.out(states).transpose(1, 0)
