import torch.nn as nn


class Runner:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))

    def score(self, batches):
        return [self.model(x).argmax(1) for x in batches]
