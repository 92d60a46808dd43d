import torch
import torch.nn.functional as F
from tqdm import tqdm

loader_args = dict(batch_size=32, shuffle=False, drop_last=True)
train_dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(features, labels), **loader_args)

net = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.GELU(), torch.nn.Linear(64, 3))
sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
for epoch in range(3):
    for step, (xb, yb) in enumerate(tqdm(train_dl)):
        sgd.zero_grad()
        F.cross_entropy(net(xb), yb).backward()
        sgd.step()
