import copy

import torch
from torch import nn


def train_model(model, loaders, criterion, optimizer, num_epochs=10):
    best_acc, best_weights = 0.0, copy.deepcopy(model.state_dict())
    for epoch in range(num_epochs):
        for phase in ["train", "val"]:
            if phase == "train":
                model.train()
            else:
                model.eval()
            correct = 0
            for inputs, labels in loaders[phase]:
                optimizer.zero_grad()
                # track history only while training
                outputs = model(inputs)
                loss = criterion(outputs, labels)
                if phase == "train":
                    loss.backward()
                    optimizer.step()
                correct += (outputs.argmax(1) == labels).sum().item()
            acc = correct / sum(len(y) for _, y in loaders[phase])
            if phase == "val" and acc > best_acc:
                best_acc, best_weights = acc, copy.deepcopy(model.state_dict())
        print(f"epoch {epoch}: best val acc {best_acc:.3f}")
    model.load_state_dict(best_weights)
    return model


if __name__ == "__main__":
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    data = {p: [(torch.randn(16, 8, 8), torch.randint(0, 10, (16,))) for _ in range(4)] for p in ("train", "val")}
    train_model(net, data, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9))
