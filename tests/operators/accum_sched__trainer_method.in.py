import torch


class Trainer:
    def __init__(self, model, accum=4):
        self.model, self.accum = model, accum
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=0.1, total_steps=1000)
        self.micro = 0

    def fit(self, batches):
        for x, y in batches:
            (self.model(x, y) / self.accum).backward()
            self.micro += 1
            if self.micro % self.accum == 0:
                self.opt.step()
                self.sched.step()
                self.opt.zero_grad()
