# expect: epoch-order~
"""Imitates the well-known MNIST convnet example: Net with two convs, dropout modules and log_softmax,
train(args, model, device, train_loader, optimizer, epoch) / test(model, device, test_loader), Adadelta + StepLR."""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
            if args.dry_run:
                break


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


def fake_digits(n, seed):
    """8x8 'digits': ten fixed stroke templates, randomly shifted by a pixel, plus Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.zeros(10, 8, 8)
    tg = torch.Generator().manual_seed(314)
    for d in range(10):
        for _ in range(3):  # three strokes per digit
            r, c = torch.randint(1, 7, (2,), generator=tg).tolist()
            if torch.rand(1, generator=tg).item() < 0.5:
                templates[d, r, 1:7] = 1.0
            else:
                templates[d, 1:7, c] = 1.0
    labels = torch.randint(0, 10, (n,), generator=g)
    shifts = torch.randint(-1, 2, (n,), generator=g).tolist()
    images = torch.stack([torch.roll(templates[lbl], s, dims=1) for lbl, s in zip(labels.tolist(), shifts)])
    images = images + 0.4 * torch.randn(n, 8, 8, generator=g)
    images = (images - 0.1307) / 0.3081
    return TensorDataset(images.unsqueeze(1), labels)


def main():
    args = SimpleNamespace(batch_size=64, test_batch_size=250, epochs=4, lr=1.0, gamma=0.7,
                           no_cuda=False, dry_run=False, seed=1, log_interval=10)
    use_cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(args.seed)

    device = torch.device("cuda" if use_cuda else "cpu")

    train_kwargs = {'batch_size': args.batch_size, 'shuffle': False}
    test_kwargs = {'batch_size': args.test_batch_size}
    if use_cuda:
        cuda_kwargs = {'num_workers': 1, 'pin_memory': True}
        train_kwargs.update(cuda_kwargs)
        test_kwargs.update(cuda_kwargs)

    dataset1 = fake_digits(1500, seed=1)
    dataset2 = fake_digits(500, seed=2)
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()

    torch.save(model.state_dict(), "mnist_cnn.pt")


if __name__ == '__main__':
    main()
