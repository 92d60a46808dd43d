import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence as pad
from torch.utils.data import DataLoader

MAX_SEQ_LEN = 128
PAD_ID = 1


def make_batch(examples):
    """Time-major batches for an LSTM: (time, batch)."""
    inputs = [torch.tensor(e["ids"]) for e in examples]
    padded = pad(inputs, padding_value=PAD_ID)
    return padded, torch.tensor([e["label"] for e in examples])


loader = DataLoader(dataset, batch_size=64, shuffle=True, collate_fn=make_batch)
for step, (x, y) in enumerate(loader):
    loss = F.cross_entropy(rnn_classifier(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
