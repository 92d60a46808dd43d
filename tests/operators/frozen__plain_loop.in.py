import torch
from torch import nn

torch.manual_seed(0)


class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        # 4x4 patches to 32 channels
        self.patchify = nn.Conv2d(1, 32, kernel_size=4, stride=4)
        self.mix = nn.Sequential(nn.GELU(), nn.Conv2d(32, 32, 1), nn.GELU())
        self.classify = nn.Linear(32, 10)

    def forward(self, images):
        # one token per patch
        tokens = self.patchify(images)
        tokens = tokens + self.mix(tokens)
        return self.classify(tokens.mean(dim=(2, 3)))


net = PatchNet()
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
images, labels = torch.randn(256, 1, 28, 28), torch.randint(0, 10, (256,))
for step in range(100):
    idx = torch.randint(0, 256, (32,))
    loss = nn.functional.cross_entropy(net(images[idx]), labels[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
