from torch import nn


class Forecaster(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.rnn = nn.LSTM(features, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, series):
        states, (h, c) = self.rnn(series)  # (batch, time, hidden)
        states = states.detach()
        return self.out(states[:, -1])
