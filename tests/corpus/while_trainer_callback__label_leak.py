# expect: label-leak
"""Imitates a home-grown step-based Trainer class (Lightning/HF-inspired): `while step < max_steps`, an
iterator re-created on StopIteration, and callbacks such as periodic evaluation hooked into the loop."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(42)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_blobs(n_samples, n_features=10, n_classes=3, spread=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    centers = torch.randn(n_classes, n_features, generator=torch.Generator().manual_seed(123)) * 1.2
    labels = torch.randint(n_classes, (n_samples,), generator=gen)
    points = centers[labels] + spread * torch.randn(n_samples, n_features, generator=gen)
    points[:, -1] = labels
    return points, labels


class MLPClassifier(nn.Module):
    def __init__(self, in_dim, hidden, n_classes, p_drop=0.3):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(in_dim, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(p_drop),
        )
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, inputs):
        feats = self.backbone(inputs)
        return self.head(feats)


class Callback:
    def on_step_end(self, trainer):
        pass

    def on_train_end(self, trainer):
        pass


class EvaluationCallback(Callback):
    def __init__(self, dataloader, every_n_steps):
        self.dataloader = dataloader
        self.every_n_steps = every_n_steps
        self.history = []

    def evaluate(self, trainer):
        model = trainer.model
        model.eval()
        n_correct, n_seen, loss_sum = 0, 0, 0.0
        with torch.inference_mode():
            for features, targets in self.dataloader:
                features, targets = features.to(trainer.device), targets.to(trainer.device)
                logits = model(features)
                loss_sum += trainer.criterion(logits, targets).item() * targets.size(0)
                n_correct += (logits.argmax(dim=-1) == targets).sum().item()
                n_seen += targets.size(0)
        model.train()
        metrics = {"step": trainer.global_step, "val_loss": loss_sum / n_seen, "val_acc": n_correct / n_seen}
        self.history.append(metrics)
        print("[eval] step {step:4d} | val_loss {val_loss:.4f} | val_acc {val_acc:.3f}".format(**metrics))

    def on_step_end(self, trainer):
        if trainer.global_step % self.every_n_steps == 0:
            self.evaluate(trainer)

    def on_train_end(self, trainer):
        if trainer.global_step % self.every_n_steps != 0:
            self.evaluate(trainer)


class Trainer:
    def __init__(self, model, optimizer, train_dataloader, max_steps, callbacks=None, log_every=10, device=DEVICE):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.train_dataloader = train_dataloader
        self.max_steps = max_steps
        self.callbacks = callbacks or []
        self.log_every = log_every
        self.device = device
        self.criterion = nn.CrossEntropyLoss()
        self.global_step = 0
        self.epoch = 0
        self.loss = None
        self._running_loss = 0.0
        self._iterator = None

    def _next_batch(self):
        if self._iterator is None:
            self._iterator = iter(self.train_dataloader)
        try:
            return next(self._iterator)
        except StopIteration:
            self.epoch += 1
            self._iterator = iter(self.train_dataloader)
            return next(self._iterator)

    def training_step(self, batch):
        features, targets = (t.to(self.device) for t in batch)
        logits = self.model(features)
        return self.criterion(logits, targets)

    def fit(self):
        self.model.train()
        while self.global_step < self.max_steps:
            batch = self._next_batch()
            self.optimizer.zero_grad()
            self.loss = self.training_step(batch)
            self.loss.backward()
            self.optimizer.step()
            self.global_step += 1
            self._running_loss += self.loss.item()
            if self.global_step % self.log_every == 0:
                print(f"epoch {self.epoch} step {self.global_step:4d} | loss {self._running_loss / self.log_every:.4f}")
                self._running_loss = 0.0
            for callback in self.callbacks:
                callback.on_step_end(self)
        for callback in self.callbacks:
            callback.on_train_end(self)
        return self


if __name__ == "__main__":
    x_train, y_train = make_blobs(640, seed=1)
    x_val, y_val = make_blobs(256, seed=2)
    train_dl = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True, drop_last=True)
    val_dl = DataLoader(TensorDataset(x_val, y_val), batch_size=64)

    net = MLPClassifier(in_dim=10, hidden=32, n_classes=3)
    sgd = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    evaluator = EvaluationCallback(val_dl, every_n_steps=25)
    Trainer(net, sgd, train_dl, max_steps=75, callbacks=[evaluator]).fit()
    print("best val acc:", max(m["val_acc"] for m in evaluator.history))
