import torch
from torch.utils.data import DataLoader


class Trainer:
    """Owns the loaders it is handed; the evaluation loader happens to shuffle too, harmlessly."""

    def __init__(self, model, train_data, eval_data, lr=3e-4):
        self.model = model
        self.train_data = train_data
        self.eval_data = eval_data
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def training_step(self, batch):
        inputs, targets = batch
        loss = torch.nn.functional.cross_entropy(self.model(inputs), targets)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.item()

    @torch.no_grad()
    def evaluate(self):
        return sum(self.model(x).argmax(1).eq(y).sum().item() for x, y in self.eval_data)

    def fit(self, epochs):
        for epoch in range(epochs):
            for batch in self.train_data:
                self.training_step(batch)
            print(epoch, self.evaluate())


trainer = Trainer(build_model(),
                  DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4, pin_memory=True),
                  DataLoader(eval_set, batch_size=512, shuffle=True))
trainer.fit(epochs=5)
