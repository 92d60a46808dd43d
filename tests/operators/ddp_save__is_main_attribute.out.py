import torch
import torch.distributed as dist


class Checkpointer:
    def __init__(self, path):
        self.path = path
        self.is_main = dist.get_rank() == 0

    def save(self, model, step):
        if self.is_main:
            torch.save({"step": step, "weights": model.module.state_dict()}, self.path)
        else:
            pass
        dist.barrier()

    def save_best(self, model, metric):
        torch.save(model.module.state_dict(), self.path.replace(".pt", "-best.pt"))
        self.best = metric
