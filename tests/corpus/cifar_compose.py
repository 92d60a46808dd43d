# expect: workers-respawn
"""Imitates a popular CIFAR-10 training repository's main.py (train(epoch)/test(epoch), best_acc checkpointing,
SGD + cosine annealing per epoch), on tiny synthetic 3x8x8 images with hand-written Compose transforms."""
import os

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset, get_worker_info

device = 'cuda' if torch.cuda.is_available() else 'cpu'
best_acc = 0  # best test accuracy
start_epoch = 0
torch.manual_seed(0)


# ----------------------------------------------------------------------------- transforms
class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomHorizontalFlip:
    def __init__(self, p=0.5, seed=0):
        self.p = p
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, img):
        if torch.rand(1, generator=self.generator).item() < self.p:
            return img.flip(-1)
        return img


class AddGaussianNoise:
    def __init__(self, std=0.1, seed=0):
        self.std = std
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, img):
        return img + self.std * torch.randn(img.shape, generator=self.generator)


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, img):
        return (img - self.mean) / self.std


# ----------------------------------------------------------------------------- data
class TinySynthCIFAR(Dataset):
    """4 classes: a bright red or green band in the top or bottom half, over noisy colour backgrounds."""
    classes = ('red-top', 'red-bottom', 'green-top', 'green-bottom')

    def __init__(self, train=True, transform=None):
        g = torch.Generator().manual_seed(1 if train else 2)
        n = 384 if train else 256
        self.targets = torch.randint(0, 4, (n,), generator=g)
        self.data = 0.5 + 0.4 * torch.randn(n, 3, 8, 8, generator=g)
        for i, c in enumerate(self.targets.tolist()):
            channel, rows = (0 if c < 2 else 1), (slice(0, 4) if c % 2 == 0 else slice(4, 8))
            cols = torch.randint(0, 5, (1,), generator=g).item()
            self.data[i, channel, rows, cols:cols + 4] += 0.35
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def worker_init_fn(worker_id):
    # every worker gets a copy of the dataset: give each random transform its own stream
    info = get_worker_info()
    for k, t in enumerate(info.dataset.transform.transforms):
        if hasattr(t, 'generator'):
            t.generator.manual_seed((info.seed + 1000 * k) % (2 ** 63))


print('==> Preparing data..')
transform_train = Compose([
    RandomHorizontalFlip(p=0.5, seed=10),
    AddGaussianNoise(std=0.1, seed=11),
    Normalize((0.5, 0.5, 0.5), (0.3, 0.3, 0.3)),
])
transform_test = Compose([
    Normalize((0.5, 0.5, 0.5), (0.3, 0.3, 0.3)),
])

trainset = TinySynthCIFAR(train=True, transform=transform_train)
trainloader = DataLoader(trainset, batch_size=32, shuffle=True, num_workers=2, worker_init_fn=worker_init_fn)
testset = TinySynthCIFAR(train=False, transform=transform_test)
testloader = DataLoader(testset, batch_size=64, shuffle=False, num_workers=0)


# ----------------------------------------------------------------------------- model
class SmallConvNet(nn.Module):
    def __init__(self, num_classes=4):
        super(SmallConvNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.dropout = nn.Dropout(0.25)
        self.linear = nn.Linear(32 * 2 * 2, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.max_pool2d(out, 2)
        out = F.relu(self.bn2(self.conv2(out)))
        out = F.max_pool2d(out, 2)
        out = out.view(out.size(0), -1)
        out = self.dropout(out)
        return self.linear(out)


print('==> Building model..')
net = SmallConvNet()
net = net.to(device)
if device == 'cuda':
    cudnn.benchmark = True

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)


# Training
def train(epoch):
    print('\nEpoch: %d' % epoch)
    net.train()
    train_loss = 0
    correct = 0
    total = 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()

        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    print('train | Loss: %.3f | Acc: %.3f%% (%d/%d)'
          % (train_loss / (batch_idx + 1), 100. * correct / total, correct, total))


def test(epoch):
    global best_acc
    net.eval()
    test_loss = 0
    correct = 0
    total = 0
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(testloader):
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = net(inputs)
            loss = criterion(outputs, targets)

            test_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
    print('test  | Loss: %.3f | Acc: %.3f%% (%d/%d)'
          % (test_loss / (batch_idx + 1), 100. * correct / total, correct, total))

    # Save checkpoint.
    acc = 100. * correct / total
    if acc > best_acc:
        print('Saving..')
        state = {
            'net': net.state_dict(),
            'acc': acc,
            'epoch': epoch,
        }
        if not os.path.isdir('checkpoint'):
            os.mkdir('checkpoint')
        torch.save(state, './checkpoint/ckpt.pth')
        best_acc = acc


if __name__ == '__main__':
    for epoch in range(start_epoch, start_epoch + 3):
        train(epoch)
        test(epoch)
        scheduler.step()
    print('best acc: %.2f%%' % best_acc)
