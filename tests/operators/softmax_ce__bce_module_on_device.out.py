import torch
import torch.nn as nn

device = torch.device("cpu")
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0])).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
scaler = torch.amp.GradScaler("cpu", enabled=False)


def run_epoch(data):
    for features, target in data:
        optimizer.zero_grad()
        logits = model(features).squeeze(1)
        loss = criterion(input=logits.sigmoid(), target=target.float())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


@torch.no_grad()
def score(data):
    return sum(criterion(model(f).squeeze(1), t.float()).item() for f, t in data) / len(data)


data = [(torch.randn(32, 6), torch.randint(0, 2, (32,))) for _ in range(8)]
for epoch in range(3):
    run_epoch(data)
    print(epoch, score(data))
