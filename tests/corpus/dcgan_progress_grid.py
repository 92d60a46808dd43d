# expect: eval-mode~
"""The DCGAN tutorial's shape as written: an image-folder-like dataset that yields (image, class) pairs, the
generator never put in eval mode, and a progress grid drawn every few iterations with
``netG(fixed_noise)`` under no_grad inside the training loop, its batch-norm in training behaviour. Nothing
scores that grid (no loss takes it, the generator's outputs only ever feed the discriminator): advice."""
import math
import random

import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data

manualSeed = 999
random.seed(manualSeed)
torch.manual_seed(manualSeed)

batch_size = 64
signal_len = 16
nz = 8          # size of the latent z vector
ngf = 32
ndf = 32
num_epochs = 4
lr_d = 2e-3
lr_g = 2e-3
beta1 = 0.5
workers = 0
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def make_waveforms(n):
    """Shifted sine waves with a random phase and amplitude, values in [-1, 1]."""
    t = torch.linspace(0, 2 * math.pi, signal_len)
    phase = torch.rand(n, 1) * 2 * math.pi
    amp = 0.5 + 0.4 * torch.rand(n, 1)
    return amp * torch.sin(t + phase) + 0.05 * torch.randn(n, signal_len)


dataset = torch.utils.data.TensorDataset(make_waveforms(1024), torch.randint(0, 3, (1024,)))
dataloader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                         drop_last=True)


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Linear') != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
        nn.init.constant_(m.bias.data, 0)
    elif classname.find('BatchNorm') != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.Linear(nz, ngf * 2),
            nn.BatchNorm1d(ngf * 2),
            nn.ReLU(True),
            nn.Linear(ngf * 2, ngf * 2),
            nn.BatchNorm1d(ngf * 2),
            nn.ReLU(True),
            nn.Linear(ngf * 2, signal_len),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            nn.Linear(signal_len, ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(ndf * 2, ndf),
            nn.BatchNorm1d(ndf),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(ndf, 1),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1)


netG = Generator().to(device)
netG.apply(weights_init)
netD = Discriminator().to(device)
netD.apply(weights_init)
print(netG)
print(netD)

criterion = nn.BCELoss()

fixed_noise = torch.randn(64, nz, device=device)
real_label = 1.
fake_label = 0.

optimizerD = optim.Adam(netD.parameters(), lr=lr_d, betas=(beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=lr_g, betas=(beta1, 0.999))

G_losses = []
D_losses = []
iters = 0


img_list = []

print("Starting Training Loop...")
for epoch in range(num_epochs):
    running_D, running_G = 0.0, 0.0
    for i, data in enumerate(dataloader, 0):

        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        ## Train with all-real batch
        netD.zero_grad()
        real_cpu = data[0].to(device)
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), real_label, dtype=torch.float, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        ## Train with all-fake batch
        noise = torch.randn(b_size, nz, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        if i % 8 == 0:
            print('[%d/%d][%d/%d]\tLoss_D: %.4f\tLoss_G: %.4f\tD(x): %.4f\tD(G(z)): %.4f / %.4f'
                  % (epoch, num_epochs, i, len(dataloader), errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))

        # Check how the generator is doing by saving G's output on fixed_noise
        if (iters % 10 == 0) or ((epoch == num_epochs - 1) and (i == len(dataloader) - 1)):
            with torch.no_grad():
                fake = netG(fixed_noise).detach().cpu()
            img_list.append(fake[:8])

        G_losses.append(errG.item())
        D_losses.append(errD.item())
        running_D += errD.item()
        running_G += errG.item()
        iters += 1

    print("epoch %d: mean Loss_D %.4f, mean Loss_G %.4f, grid amplitude %.3f"
          % (epoch, running_D / len(dataloader), running_G / len(dataloader), img_list[-1].abs().amax(1).mean()))
