from torch import optim


class Trainer:
    def __init__(self, model, lr=0.1, weight_decay=5e-4):
        self.model = model
        weights = [p for name, p in model.named_parameters() if not name.endswith("bias")]
        biases = [p for name, p in model.named_parameters() if name.endswith("bias")]
        self.groups = [
            dict(params=weights, weight_decay=weight_decay),
            dict(params=biases, weight_decay=0),  # no decay on biases
        ]
        self.optimizer = optim.SGD(self.groups, lr=lr, momentum=0.9, nesterov=True)

    def step(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
