"""A data-module class: statistics computed in setup(), kept for inference, applied to each split's features."""
import torch
from torch.utils.data import DataLoader, TensorDataset


class ReadingsDataModule:
    def __init__(self, path, batch_size=128):
        self.path, self.batch_size = path, batch_size

    def setup(self):
        table = torch.load(self.path)
        feats, labels = table["features"].float(), table["labels"]
        n_train = int(0.8 * len(labels))
        mu = feats[:n_train].mean(dim=0)
        sd = feats[:n_train].std(dim=0)
        self.stats = {"mean": mu, "std": sd}
        self.train_set = TensorDataset((feats[:n_train] - mu) / sd, labels[:n_train])
        self.val_set = TensorDataset((feats[n_train:] - mu) / sd, labels[n_train:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)
