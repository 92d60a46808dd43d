import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, optimizer, local_rank, accumulate=1):
        self.local_rank = local_rank
        self.model = DDP(model.cuda(local_rank), device_ids=[local_rank], find_unused_parameters=False)
        self.optimizer = optimizer
        self.criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
        self.accumulate = accumulate

    def training_step(self, batch, step):
        inputs = batch["pixel_values"].cuda(self.local_rank, non_blocking=True)
        labels = batch["labels"].cuda(self.local_rank, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            outputs = self.model.module(inputs)
            loss = self.criterion(outputs, labels) / self.accumulate
        loss.backward()
        if (step + 1) % self.accumulate == 0:
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def validation_step(self, batch):
        logits = self.model(batch["pixel_values"].cuda(self.local_rank))
        return (logits.argmax(-1) == batch["labels"].cuda(self.local_rank)).float().mean()
