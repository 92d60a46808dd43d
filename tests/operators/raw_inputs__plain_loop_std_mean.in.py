"""No functions: statistics from torch.std_mean, an epsilon in the divisor, the model called on the tensors."""
import torch
import torch.nn.functional as F

x_train, y_train = torch.load("train.pt")
x_test, y_test = torch.load("test.pt")
std, mean = torch.std_mean(x_train, dim=0)
x_train = (x_train - mean) / (std + 1e-8)
x_test = (x_test - mean) / (std + 1e-8)
net = torch.nn.Sequential(torch.nn.Linear(x_train.shape[1], 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for step in range(200):
    idx = torch.randint(0, len(x_train), (64,))
    opt.zero_grad()
    F.cross_entropy(net(x_train[idx]), y_train[idx]).backward()
    opt.step()
print((net(x_test).argmax(1) == y_test).float().mean())
