import torch
import torch.nn.functional as F


def run_epoch(model, loader, optimizer):
    model.train()
    hits, total, running = 0, 0, 0.0
    for images, labels in loader:
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item() * labels.size(0)
        hits += logits.argmax(dim=1).eq(labels).sum().item()
        total += labels.size(0)
    return running / total, hits / total
