# expect: padding-waste
"""Imitates a sentence-classification CNN (Kim-style): n-gram convolutions over padded token ids, a max over
time that padding cannot win, OneCycleLR stepped per batch, and a run "preempted" after two epochs that a
second call resumes from its checkpoint (model, optimizer, schedule, epoch), SGD with Nesterov momentum."""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

PAD, GOOD, BAD = 0, 1, 2
VOCAB, MAX_LEN = 40, 20


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(5, MAX_LEN + 1, (n,), generator=g)
    ids = torch.randint(3, VOCAB, (n, MAX_LEN), generator=g)
    marks = torch.randint(0, 5, (n, MAX_LEN), generator=g)
    ids = torch.where(marks == 0, GOOD, torch.where(marks == 1, BAD, ids))
    ids = ids.masked_fill(torch.arange(MAX_LEN) >= lengths[:, None], PAD)
    label = ((ids == GOOD).sum(1) > (ids == BAD).sum(1)).long()
    return TensorDataset(ids, label)


class KimCNN(nn.Module):
    def __init__(self, dim=24, widths=(2, 3, 4), channels=16):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.convs = nn.ModuleList(nn.Conv1d(dim, channels, w, padding=w - 1) for w in widths)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(channels * len(widths), 2)

    def forward(self, ids):
        x = self.embed(ids).transpose(1, 2)
        keep = ids != PAD
        pooled = []
        for conv in self.convs:
            h = F.relu(conv(x))[:, :, :ids.size(1)]
            pooled.append(h.masked_fill(~keep[:, None, :], float("-inf")).amax(dim=2))
        return self.fc(self.dropout(torch.cat(pooled, dim=1)))


def run(ckpt_path, epochs, stop_after=None):
    torch.manual_seed(0)
    train = DataLoader(make_split(384, 1), batch_size=32, shuffle=True)
    val = DataLoader(make_split(128, 2), batch_size=128)
    model = KimCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=epochs * len(train))
    start = 0
    if os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        sched.load_state_dict(ckpt["sched"])
        start = ckpt["epoch"] + 1
        print(f"resumed at epoch {start}")
    for epoch in range(start, epochs):
        model.train()
        for ids, label in train:
            loss = F.cross_entropy(model(ids), label)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for ids, label in val:
                correct += (model(ids).argmax(1) == label).sum().item()
        print(f"epoch {epoch} loss {loss.item():.3f} val acc {correct / len(val.dataset):.3f}")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "epoch": epoch}, ckpt_path)
        if stop_after is not None and epoch + 1 == stop_after:
            print("preempted")
            return


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "last.pt")
        run(path, epochs=4, stop_after=2)
        run(path, epochs=4)
