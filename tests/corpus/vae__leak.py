# expect: graphs-retained
"""Imitates the classic fully-connected VAE example: encode/reparameterize/decode, BCE + KL loss summed over
the batch, and train(epoch)/test(epoch) functions over a labelled image loader whose labels go unused."""
import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

BATCH_SIZE = 32
EPOCHS = 4
LOG_INTERVAL = 8
IMG_PIXELS = 64
LATENT = 4

torch.manual_seed(1)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def binary_blobs(n, n_prototypes=5, flip=0.05, seed=0):
    """8x8 binary 'images': a handful of fixed prototypes with a few pixels flipped."""
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(n_prototypes, IMG_PIXELS, generator=torch.Generator().manual_seed(7)) > 0.5).float()
    labels = torch.randint(0, n_prototypes, (n,), generator=g)
    flips = (torch.rand(n, IMG_PIXELS, generator=g) < flip).float()
    images = (prototypes[labels] + flips) % 2
    return images.view(n, 1, 8, 8), labels


train_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(*binary_blobs(768, seed=1)), batch_size=BATCH_SIZE, shuffle=True)
test_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(*binary_blobs(192, seed=2)), batch_size=BATCH_SIZE, shuffle=False)


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(IMG_PIXELS, 48)
        self.fc21 = nn.Linear(48, LATENT)
        self.fc22 = nn.Linear(48, LATENT)
        self.fc3 = nn.Linear(LATENT, 48)
        self.fc4 = nn.Linear(48, IMG_PIXELS)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, IMG_PIXELS))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-2)


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, IMG_PIXELS), reduction='sum')
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2), see Kingma & Welling, Appendix B
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss
        optimizer.step()
        if batch_idx % LOG_INTERVAL == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item() / len(data)))
    print('====> Epoch: {} Average loss: {:.4f}'.format(epoch, train_loss / len(train_loader.dataset)))


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
    test_loss /= len(test_loader.dataset)
    print('====> Test set loss: {:.4f}'.format(test_loss))


if __name__ == "__main__":
    for epoch in range(1, EPOCHS + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = model.decode(torch.randn(16, LATENT).to(device))
            print('sampled {} images, mean intensity {:.3f}'.format(len(sample), sample.mean().item()))
