import copy

import torch
import torch.nn.functional as F


class Agent:
    def __init__(self, q):
        self.q = q
        self.q_target = copy.deepcopy(self.q)
        self.opt = torch.optim.RMSprop(self.q.parameters(), lr=2.5e-4)
        self.best = None

    def learn(self, s, a, r, s2, done):
        with torch.no_grad():
            y = r + 0.99 * (1 - done) * self.q_target(s2).max(1).values
        loss = F.mse_loss(self.q(s).gather(1, a).squeeze(1), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

    def keep_best(self):
        self.best = copy.deepcopy(self.q)
