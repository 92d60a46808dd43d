import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

trainloader = DataLoader(trainset, batch_size=128, shuffle=True)
testloader = DataLoader(testset, batch_size=100, shuffle=False)


def train(epoch):
    net.train()
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        optimizer.zero_grad()
        loss = F.cross_entropy(net(inputs), targets)
        loss.backward()
        optimizer.step()


def test(epoch):
    net.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(trainloader):
            correct += net(inputs).argmax(1).eq(targets).sum().item()
            total += targets.size(0)
    print(epoch, 100.0 * correct / total)


for epoch in range(200):
    train(epoch)
    test(epoch)
