"""A job configured by a file named on its command line, relative to the folder it is run from, that writes into
that folder as real jobs do: a log appended to, a checkpoint saved over an old one, a run folder made inside an
existing one, a stale file removed, a rename, a chdir into a folder of its own. Each write reads back as written."""
import argparse
import json
import os

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
args = parser.parse_args()
with open(args.config) as f:
    config = json.load(f)

torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x[:, 0] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(8, config["width"]), torch.nn.ReLU(), torch.nn.Linear(config["width"], 2))
optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
for epoch in range(config["epochs"]):
    for i in range(0, len(x), 32):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        optimizer.step()
    with open("train.log", "a") as log:
        log.write(f"epoch {epoch} loss {loss.item():.3f}\n")

torch.save(model.state_dict(), "checkpoint.pt")
assert torch.load("checkpoint.pt")["0.weight"].shape == (config["width"], 8)
os.makedirs("runs/today", exist_ok=True)
with open("runs/today/metrics.json", "w") as f:
    json.dump({"loss": loss.item()}, f)
os.remove("runs/stale.txt")
os.rename("configs/small.json", "configs/used.json")
os.chdir("runs")
with open("latest.txt", "w") as f:
    f.write("today")
os.chdir("..")
with open("train.log") as log:
    lines = log.read().splitlines()
assert lines[0] == "from an earlier run" and len(lines) == 1 + config["epochs"], lines
print("final loss", round(loss.item(), 3))
