# expect: target-grad
"""Knowledge distillation: a briefly pre-trained teacher guides a smaller student with dropout."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
C, D = 5, 20


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2 * C, D, generator=torch.Generator().manual_seed(123)) * 1.2
    k = torch.randint(0, 2 * C, (n,), generator=g)
    return centres[k] + torch.randn(n, D, generator=g), k % C


xtr, ytr = make_data(2000, 1)
xva, yva = make_data(500, 2)
train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset(xva, yva), batch_size=256)

teacher = nn.Sequential(nn.Linear(D, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, C))
student = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, C))


def evaluate(model):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / total


# 1) pre-train the teacher briefly
opt_t = torch.optim.Adam(teacher.parameters(), lr=3e-3)
for epoch in range(3):
    teacher.train()
    for x, y in train_loader:
        opt_t.zero_grad()
        loss = F.cross_entropy(teacher(x), y)
        loss.backward()
        opt_t.step()
print(f"teacher acc {evaluate(teacher):.3f}")

# 2) distil into the student
teacher.eval()
T, alpha = 4.0, 0.7
opt_s = torch.optim.Adam(student.parameters(), lr=3e-3)
for epoch in range(4):
    student.train()
    running = 0.0
    for x, y in train_loader:
        t_logits = teacher(x)
        s_logits = student(x)
        kd = F.kl_div(F.log_softmax(s_logits / T, dim=1), F.softmax(t_logits / T, dim=1),
                      reduction="batchmean") * T * T
        ce = F.cross_entropy(s_logits, y)
        loss = alpha * kd + (1 - alpha) * ce
        opt_s.zero_grad()
        loss.backward()
        opt_s.step()
        running += loss.item()
    print(f"epoch {epoch} loss {running / len(train_loader):.4f} student acc {evaluate(student):.3f}")
