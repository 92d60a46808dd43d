import torch
from torch import nn


class Seq2Label(nn.Module):
    def __init__(self, vocab_size, d_model=64, temperature=2.0):
        super().__init__()
        self.scale = d_model ** 0.5
        self.temperature = temperature
        self.gate = nn.Parameter(torch.ones(d_model))
        self.tok = nn.Embedding(vocab_size, d_model)
        self.rnn = nn.GRU(d_model, d_model, batch_first=True)
        self.out = nn.Linear(d_model, 2)

    def encode(self, tokens):
        emb = self.tok(tokens) * self.scale
        states, _ = self.rnn(emb)
        last = states[:, -1]
        last = last * self.gate
        return last

    def forward(self, tokens):
        h = self.encode(tokens)
        h = h / self.temperature
        return self.out(h)


class Trainer:
    def __init__(self, model, lr=1e-3, accumulation=2):
        self.model = model
        self.accumulation = accumulation
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def step(self, batch):
        loss = nn.functional.cross_entropy(self.model(batch["tokens"]), batch["label"])
        loss = loss / self.accumulation
        loss.backward()
        return loss
