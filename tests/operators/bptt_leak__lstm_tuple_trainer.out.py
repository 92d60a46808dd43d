import torch


class Trainer:
    def __init__(self, model, optimizer, stream):
        self.model, self.optimizer, self.stream = model, optimizer, stream

    def epoch(self):
        state = None
        for tokens, targets in self.stream:
            logits, state = self.model(tokens, state)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
