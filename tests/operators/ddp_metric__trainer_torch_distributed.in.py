import torch
import torch.nn.functional as F


def average_gradients(model):
    world_size = float(torch.distributed.get_world_size())
    for param in model.parameters():
        torch.distributed.all_reduce(param.grad.data, op=torch.distributed.ReduceOp.SUM)
        param.grad.data /= world_size


class Trainer:
    def __init__(self, model, optimizer, train_loader, test_loader, device):
        self.model, self.optimizer = model, optimizer
        self.train_loader, self.test_loader = train_loader, test_loader
        self.device = device

    def train_epoch(self):
        self.model.train()
        for data, target in self.train_loader:
            data, target = data.to(self.device), target.to(self.device)
            self.optimizer.zero_grad()
            loss = F.nll_loss(self.model(data), target)
            loss.backward()
            average_gradients(self.model)
            self.optimizer.step()

    def test(self):
        self.model.eval()
        totals = torch.zeros(3, device=self.device)  # loss sum, correct, seen
        with torch.no_grad():
            for data, target in self.test_loader:
                data, target = data.to(self.device), target.to(self.device)
                output = self.model(data)
                totals[0] += F.nll_loss(output, target, reduction="sum")
                totals[1] += output.argmax(dim=1).eq(target).sum()
                totals[2] += target.numel()
        torch.distributed.all_reduce(totals)
        loss, correct, seen = totals.tolist()
        if torch.distributed.get_rank() == 0:
            print(f"test loss {loss / seen:.4f}, accuracy {correct}/{int(seen)} ({100.0 * correct / seen:.1f}%)")
