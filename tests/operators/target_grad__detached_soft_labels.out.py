import torch
import torch.nn as nn

big = torch.load("teacher.pt", weights_only=False)
kd = nn.KLDivLoss(reduction="batchmean")
for epoch in range(10):
    for images, labels in train_loader:
        with torch.no_grad():
            student.eval()
            accuracy = (student(images).argmax(1) == labels).float().mean()
        student.train()
        soft_targets = torch.softmax(big(images) / 4.0, dim=1)
        outputs = student(images)
        loss = kd(torch.log_softmax(outputs / 4.0, dim=1), soft_targets) * 16.0
        opt.zero_grad()
        loss.backward()
        opt.step()
