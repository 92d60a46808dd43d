import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

MAX_SEQ_LEN = 128
PAD_ID = 1


def make_batch(examples):
    """Time-major batches for an LSTM: (time, batch)."""
    inputs = [torch.tensor(e["ids"]) for e in examples]
    padded = torch.stack([F.pad(seq, (0, MAX_SEQ_LEN - len(seq)), value=PAD_ID) for seq in inputs], dim=1)
    return padded, torch.tensor([e["label"] for e in examples])


loader = DataLoader(dataset, batch_size=64, shuffle=True, collate_fn=make_batch)
for step, (x, y) in enumerate(loader):
    loss = F.cross_entropy(rnn_classifier(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
