import os

import torch
import torch.distributed as dist


def train(model, optimizer, scheduler, loader, epochs, out_dir):
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            model(x, labels=y).loss.backward()
            optimizer.step()
            scheduler.step()

        if dist.get_rank() == 0:
            # one checkpoint per epoch, overwritten
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
            torch.save(state, os.path.join(out_dir, "last.pt"))
            print(f"saved epoch {epoch}")
        dist.barrier()
