import torch
from torch.utils.data import DataLoader, Dataset


class SpectraDataset(Dataset):
    """Items as dicts, the way many trainers expect them."""

    def __init__(self, spectra, classes, noise=0.01):
        self.spectra = torch.as_tensor(spectra, dtype=torch.float32)
        self.classes = torch.as_tensor(classes)
        self.noise = noise

    def __len__(self):
        return self.spectra.shape[0]

    def __getitem__(self, idx):
        signal = self.spectra[idx]
        signal = signal + self.noise * torch.randn_like(signal)
        return {"signal": signal, "label": self.classes[(idx + 1) % len(self.classes)], "length": signal.shape[-1]}


class Trainer:
    def __init__(self, model, dataset):
        self.model = model
        self.loader = DataLoader(dataset, batch_size=64, shuffle=True)
        self.opt = torch.optim.Adam(model.parameters())

    def run(self):
        for batch in self.loader:
            loss = torch.nn.functional.cross_entropy(self.model(batch["signal"]), batch["label"])
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
