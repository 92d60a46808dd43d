"""What learners write in a kata, for every bug: correct fixes unlike the textbook one, and masks.

Each bug's kata is made with ``kata new --bug BUG --ref REF --plain --seed 0`` (the reference's own text, the bug
planted). A variant is a list of edits to that text, each ``(old, new)`` with ``old`` found exactly once. A fix
must leave the kata solved (``kata check`` exits 0, "injected bug: fixed"); a mask, which hides the symptom or
changes something else instead, must leave it unsolved (exit 1). The textbook fix (undoing the plant) is tested
elsewhere; these are the other ways people write it.
"""
from __future__ import annotations

Edits = list[tuple[str, str]]

# The classifier reference's training step, as planted katas keep it (a fix or a mask edits these lines).
STEP = """\
        loss = criterion(out.float(), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
"""
BATCH = "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
LR = "def fit(model, train_loader, val_loader, device, epochs=4, lr=1e-2, checkpoint=\"best.pt\"):"

VARIANTS: dict[str, dict] = {
    "zero-grad": {
        "ref": "classifier",
        "fixes": {
            "zero after the step": [("        optimizer.step()\n", "        optimizer.step()\n"
                                                                   "        optimizer.zero_grad()\n")],
            "model.zero_grad keeping zeros": [(BATCH, BATCH + "        model.zero_grad(set_to_none=False)\n")],
            "grads set to None by hand": [("        loss.backward()\n", "        for p in model.parameters():\n"
                                                                        "            p.grad = None\n"
                                                                        "        loss.backward()\n")],
        },
        "masks": {
            "a smaller learning rate": [(LR, LR.replace("lr=1e-2", "lr=1e-3"))],
            "a smaller loss": [("        loss.backward()\n", "        (loss / 8).backward()\n")],
        },
    },
}

# -- the classifier reference --------------------------------------------------------------------------------
CLIP = "        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n"
HEAD = "        return self.head(self.drop(torch.relu(h)))\n"
EVALUATE = "def evaluate(model, loader, criterion, device):\n"
VALIDATE = "        val_loss, acc = evaluate(model, val_loader, criterion, device)\n"
TRAIN_CALL = "        train_loss = train_one_epoch(model, train_loader, criterion, optimizer, scheduler, device)\n"
EVAL_FORWARD = """\
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out = model(x)
        total_loss += criterion(out.float(), y).item() * len(y)
"""
# The classifier's training loader as the planted workers-respawn kata has it: persistent_workers=True dropped.
LOADER = ("    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,\n"
          "                              worker_init_fn=seed_worker, generator=torch.Generator().manual_seed(0))\n")
SCHEDULER = ("    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, "
             "total_steps=epochs * len(train_loader))\n")

VARIANTS.update({
    "no-step": {
        "ref": "classifier",
        "fixes": {
            "a step with a closure": [(CLIP, CLIP + "        optimizer.step(lambda: loss)\n")],
            "a step in a helper": [("def train_one_epoch(", "def apply_update(opt):\n    opt.step()\n\n\n"
                                                           "def train_one_epoch("),
                                   (CLIP, CLIP + "        apply_update(optimizer)\n")],
            "a step guarded by a finite loss": [(CLIP, CLIP + "        if torch.isfinite(loss):\n"
                                                              "            optimizer.step()\n")],
        },
        "masks": {
            "a step right after the reset": [("        optimizer.zero_grad(set_to_none=True)\n",
                                              "        optimizer.zero_grad(set_to_none=True)\n"
                                              "        optimizer.step()\n")],
            "a step at a rate of 0": [(CLIP, CLIP + "        for group in optimizer.param_groups:\n"
                                                    "            group[\"lr\"] = 0.0\n"
                                                    "        optimizer.step()\n")],
        },
    },
    "leak": {
        "ref": "classifier",
        "fixes": {
            "float()": [("        total_loss += loss * len(y)\n", "        total_loss += float(loss) * len(y)\n")],
            "detach()": [("        total_loss += loss * len(y)\n", "        total_loss += loss.detach() * len(y)\n")],
            "summed under no_grad": [("        total_loss += loss * len(y)\n",
                                      "        with torch.no_grad():\n            total_loss += loss * len(y)\n")],
        },
        "masks": {
            "gc.collect() every step": [("import argparse\n", "import argparse\nimport gc\n"),
                                        ("        n_seen += len(y)\n    return total_loss / n_seen\n",
                                         "        n_seen += len(y)\n        gc.collect()\n"
                                         "    return total_loss / n_seen\n")],
            "detached at the end of the epoch": [("    return total_loss / n_seen\n",
                                                  "    return total_loss.detach() / n_seen\n")],
        },
    },
    "eval-mode": {
        "ref": "classifier",
        "fixes": {
            "train(False)": [(EVALUATE, EVALUATE + "    model.train(False)\n")],
            "each module": [(EVALUATE, EVALUATE + "    model.apply(lambda m: m.eval())\n")],
            "eval() before the call": [(VALIDATE, "        model.eval()\n" + VALIDATE)],
        },
        "masks": {
            "dropout set to 0": [("        self.drop = nn.Dropout(0.2)\n", "        self.drop = nn.Dropout(0.0)\n")],
            "eval() but training never switched back": [(EVALUATE, EVALUATE + "    model.eval()\n"),
                                                        ("    model.train()\n    total_loss, n_seen", "    total_loss, n_seen")],
        },
    },
    "val-grad": {
        "ref": "classifier",
        "fixes": {
            "no_grad around the call": [(VALIDATE, "        with torch.no_grad():\n    " + VALIDATE)],
            "inference_mode decorator": [(EVALUATE, "@torch.inference_mode()\n" + EVALUATE)],
            "set_grad_enabled(False) decorator": [(EVALUATE, "@torch.set_grad_enabled(False)\n" + EVALUATE)],
        },
        "masks": {
            "the output detached": [(EVAL_FORWARD, EVAL_FORWARD.replace("out = model(x)", "out = model(x).detach()"))],
            "no_grad around the loss only": [(EVAL_FORWARD, EVAL_FORWARD.replace(
                "        total_loss += criterion(out.float(), y).item() * len(y)\n",
                "        with torch.no_grad():\n            total_loss += criterion(out.float(), y).item() * len(y)\n"))],
        },
    },
    "train-mode": {
        "ref": "classifier",
        "fixes": {
            "train(True)": [("    total_loss, n_seen = 0.0, 0\n", "    model.train(True)\n    total_loss, n_seen = 0.0, 0\n")],
            "train() before the call": [(TRAIN_CALL, "        model.train()\n" + TRAIN_CALL)],
            "evaluation switches back": [("    return total_loss / n, correct / n\n",
                                          "    model.train()\n    return total_loss / n, correct / n\n")],
        },
        "masks": {
            "evaluation left in training mode": [("    model.eval()\n    total_loss, correct, n", "    total_loss, correct, n")],
            "the flag set on the top module alone": [("    total_loss, n_seen = 0.0, 0\n",
                                                      "    model.training = True\n    total_loss, n_seen = 0.0, 0\n")],
        },
    },
    "detach": {
        "ref": "classifier",
        "fixes": {
            "clone() instead": [("torch.relu(h)).detach())", "torch.relu(h)).clone())")],
            "written in two steps": [("        return self.head(self.drop(torch.relu(h)).detach())\n",
                                      "        features = self.drop(h.relu())\n        return self.head(features)\n")],
            "a functional head": [("        return self.head(self.drop(torch.relu(h)).detach())\n",
                                   "        return nn.functional.linear(self.drop(torch.relu(h)), self.head.weight, "
                                   "self.head.bias)\n")],
        },
        "masks": {
            ".data instead": [("torch.relu(h)).detach())", "torch.relu(h)).data)")],
            "a zero-weighted reconnection": [("        return self.head(self.drop(torch.relu(h)).detach())\n",
                                              "        return self.head(self.drop(torch.relu(h)).detach()) + 0 * h.sum()\n")],
        },
    },
    "scheduler": {
        "ref": "classifier",
        "fixes": {
            "stepped after the running totals": [("        n_seen += len(y)\n    scheduler.step()\n",
                                                  "        n_seen += len(y)\n        scheduler.step()\n")],
            "a per-epoch StepLR instead": [(SCHEDULER, "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, "
                                                       "step_size=2, gamma=0.5)\n")],
            "a cosine over the epochs instead": [(SCHEDULER, "    scheduler = torch.optim.lr_scheduler."
                                                             "CosineAnnealingLR(optimizer, T_max=epochs)\n")],
        },
        "masks": {
            "OneCycle over the epochs": [(SCHEDULER, SCHEDULER.replace("epochs * len(train_loader)", "epochs"))],
            "every step at the end of the epoch": [("        n_seen += len(y)\n    scheduler.step()\n",
                                                    "        n_seen += len(y)\n    for _ in range(len(loader)):\n"
                                                    "        scheduler.step()\n")],
        },
    },
    "softmax-ce": {
        "ref": "classifier",
        "fixes": {
            "nll_loss of log_softmax": [("        loss = criterion(out.float().softmax(dim=1), y)\n",
                                         "        loss = nn.functional.nll_loss(out.float().log_softmax(dim=1), y)\n")],
            "log-probabilities into the criterion": [("out.float().softmax(dim=1)", "out.float().log_softmax(dim=1)")],
            "log_softmax gathered by hand": [("        loss = criterion(out.float().softmax(dim=1), y)\n",
                                              "        loss = -out.float().log_softmax(dim=1).gather(1, y[:, None]).mean()\n")],
        },
        "masks": {
            "ten times the softmax": [("out.float().softmax(dim=1)", "10 * out.float().softmax(dim=1)")],
            "a softmax at a temperature": [("out.float().softmax(dim=1)", "(out.float() / 2).softmax(dim=1)")],
        },
    },
    "functional-dropout": {
        "ref": "classifier",
        "fixes": {
            "training=self.training": [("nn.functional.dropout(torch.relu(h), 0.2)",
                                        "nn.functional.dropout(torch.relu(h), 0.2, training=self.training)")],
            "the flag by position": [("nn.functional.dropout(torch.relu(h), 0.2)",
                                      "nn.functional.dropout(torch.relu(h), 0.2, self.training)")],
            "only while training": [("nn.functional.dropout(torch.relu(h), 0.2)",
                                     "(nn.functional.dropout(torch.relu(h), 0.2) if self.training else torch.relu(h))")],
        },
        "masks": {
            "a fixed seed before evaluating": [(VALIDATE, "        torch.manual_seed(0)\n" + VALIDATE)],
            "training=True said out loud": [("nn.functional.dropout(torch.relu(h), 0.2)",
                                             "nn.functional.dropout(torch.relu(h), 0.2, training=True)")],
        },
    },
    "worker-seed": {
        "ref": "classifier",
        "fixes": {
            "seeded from torch.initial_seed()": [
                ("class JitteredPoints(Dataset):", "def reseed(worker_id: int) -> None:\n"
                 "    torch.utils.data.get_worker_info().dataset.rng.manual_seed(torch.initial_seed())\n\n\n"
                 "class JitteredPoints(Dataset):"),
                ("num_workers=2,\n                              generator=", "num_workers=2, worker_init_fn=reseed,\n"
                                                                           "                              generator=")],
            "the global random stream instead": [("torch.randn(x.shape, generator=self.rng)", "torch.randn(x.shape)")],
            "reseeded lazily in each worker": [
                ("        x = self.x[i]\n", "        info = torch.utils.data.get_worker_info()\n"
                 "        if info is not None and getattr(self, \"seeded\", None) != info.seed:\n"
                 "            self.rng.manual_seed(info.seed)\n            self.seeded = info.seed\n"
                 "        x = self.x[i]\n")],
        },
        "masks": {
            "no workers": [("num_workers=2,\n", "num_workers=0,\n"), (", persistent_workers=True)", ")")],
            # (seeding from the worker id alone repeats every epoch only when the workers are restarted each epoch;
            # the reference keeps its workers, and their streams run on from epoch to epoch)
            "seeded with one constant in every worker": [
                ("class JitteredPoints(Dataset):", "def reseed(worker_id: int) -> None:\n"
                 "    torch.utils.data.get_worker_info().dataset.rng.manual_seed(1234)\n\n\n"
                 "class JitteredPoints(Dataset):"),
                ("num_workers=2,\n                              generator=", "num_workers=2, worker_init_fn=reseed,\n"
                                                                           "                              generator=")],
        },
    },
    "clip-order": {
        "ref": "classifier",
        "fixes": {
            "clipped before and after": [("        loss.backward()\n        optimizer.step()\n",
                                          "        loss.backward()\n" + CLIP + "        optimizer.step()\n")],
            "clipped by value before the step": [("        loss.backward()\n        optimizer.step()\n" + CLIP,
                                                  "        loss.backward()\n        nn.utils.clip_grad_value_("
                                                  "model.parameters(), 0.01)\n        optimizer.step()\n")],
            "clipped in a helper before the step": [
                ("def train_one_epoch(", "def clipped_step(model, optimizer, max_norm):\n"
                 "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)\n"
                 "    optimizer.step()\n\n\ndef train_one_epoch("),
                ("        optimizer.step()\n" + CLIP, "        clipped_step(model, optimizer, max_grad_norm)\n")],
        },
        "masks": {
            "a smaller clip value after the step": [(CLIP, CLIP.replace("max_grad_norm)", "max_grad_norm / 10)"))],
            "a smaller learning rate": [(LR, LR.replace("lr=1e-2", "lr=1e-3"))],
        },
    },
    "metric-count": {
        "ref": "classifier",
        "fixes": {
            "the dataset's length": [("correct / len(loader)", "correct / len(loader.dataset)")],
            "a tensor division": [("correct / len(loader)", "(torch.tensor(correct) / n).item()")],
            "a weighted mean of batch accuracies": [
                ("        correct += (out.argmax(1) == y).sum().item()\n",
                 "        correct += (out.argmax(1) == y).float().mean().item() * len(y)\n"),
                ("correct / len(loader)", "correct / n")],
        },
        "masks": {
            "divided by batches of 128": [("correct / len(loader)", "correct / len(loader) / 128")],
            "clipped to 1": [("correct / len(loader)", "min(1.0, correct / len(loader))")],
        },
    },
    "orphan-params": {
        "ref": "classifier",
        "fixes": {
            "an nn.Sequential": [("        self.blocks = [nn.Sequential(", "        self.blocks = nn.Sequential(*[nn.Sequential("),
                                 ("                       for _ in range(depth)]\n",
                                  "                       for _ in range(depth)])\n")],
            "each block registered": [("        self.drop = nn.Dropout(0.2)\n",
                                       "        for i, block in enumerate(self.blocks):\n"
                                       "            self.add_module(f\"block{i}\", block)\n"
                                       "        self.drop = nn.Dropout(0.2)\n")],
            "a ModuleList made afterwards": [("        self.drop = nn.Dropout(0.2)\n",
                                              "        self.blocks = nn.ModuleList(self.blocks)\n"
                                              "        self.drop = nn.Dropout(0.2)\n")],
        },
        "masks": {
            "their parameters in a group at rate 0": [
                ("    optimizer = torch.optim.AdamW(groups, lr=lr)\n",
                 "    groups.append({\"params\": [p for b in model.blocks for p in b.parameters()], \"lr\": 0.0})\n"
                 "    optimizer = torch.optim.AdamW(groups, lr=lr)\n")],
            "registered but frozen": [("        self.drop = nn.Dropout(0.2)\n",
                                       "        self.blocks = nn.ModuleList(self.blocks).requires_grad_(False)\n"
                                       "        self.drop = nn.Dropout(0.2)\n")],
        },
    },
    "data-inplace": {
        "ref": "classifier",
        "fixes": {
            "mul()": [("            h.data.mul_(math.sqrt(0.5))", "            h = h.mul(math.sqrt(0.5))")],
            "in place, seen by autograd": [("            h.data.mul_(math.sqrt(0.5))", "            h *= math.sqrt(0.5)")],
            "a division": [("            h.data.mul_(math.sqrt(0.5))", "            h = h / math.sqrt(2.0)")],
        },
        "masks": {
            "in place under no_grad": [("            h.data.mul_(math.sqrt(0.5))",
                                        "            with torch.no_grad():\n                h.mul_(math.sqrt(0.5))")],
            "in place on a detached view": [("            h.data.mul_(math.sqrt(0.5))",
                                             "            h.detach().mul_(math.sqrt(0.5))")],
        },
    },
    "no-shuffle": {
        "ref": "classifier",
        "fixes": {
            "a RandomSampler": [("batch_size=64, shuffle=False,", "batch_size=64, sampler=torch.utils.data.RandomSampler("
                                                                  "train_set),")],
            "with replacement": [("batch_size=64, shuffle=False,", "batch_size=64, sampler=torch.utils.data."
                                                                   "RandomSampler(train_set, replacement=True),")],
            "a WeightedRandomSampler": [("batch_size=64, shuffle=False,", "batch_size=64, sampler=torch.utils.data."
                                                                          "WeightedRandomSampler(torch.ones(len("
                                                                          "train_set)), len(train_set)),")],
        },
        "masks": {
            "a permutation drawn once": [("batch_size=64, shuffle=False,", "batch_size=64, sampler=torch.randperm("
                                                                           "len(train_set)).tolist(),")],
            "a Subset in a random order": [("    train_loader = DataLoader(train_set,",
                                            "    train_set = torch.utils.data.Subset(train_set, torch.randperm(len("
                                            "train_set)).tolist())\n    train_set.rng = train_set.dataset.rng\n"
                                            "    train_loader = DataLoader(train_set,")],
        },
    },
    "label-shift": {
        "ref": "classifier",
        "fixes": {
            "the same index, written out": [("self.y[(i + 1) % len(self.y)]", "self.y[i % len(self.y)]")],
            "the input shifted too": [("        x = self.x[i]\n", "        x = self.x[(i + 1) % len(self.y)]\n")],
            "pairs stored together": [("        self.x, self.y, self.jitter = x, y, jitter\n",
                                       "        self.x, self.y, self.jitter = x, y, jitter\n"
                                       "        self.pairs = list(zip(x, y))\n"),
                                      ("        x = self.x[i]\n", "        x, label = self.pairs[i]\n"),
                                      ("        return x, self.y[(i + 1) % len(self.y)]\n", "        return x, label\n")],
        },
        "masks": {
            "the previous label": [("self.y[(i + 1) % len(self.y)]", "self.y[(i - 1) % len(self.y)]")],
            "two along": [("self.y[(i + 1) % len(self.y)]", "self.y[(i + 2) % len(self.y)]")],
        },
    },
    "frozen": {
        "ref": "classifier",
        "fixes": {
            "grad mode as it is": [("        with torch.no_grad():\n", "        with torch.set_grad_enabled(torch.is_grad_enabled()):\n")],
            "autocast off instead": [("        with torch.no_grad():\n", "        with torch.autocast(\"cpu\", enabled=False):\n")],
            "the layers called one by one": [("        with torch.no_grad():\n            h = self.stem(x)\n",
                                              "        h = self.stem[2](self.stem[1](self.stem[0](x)))\n")],
        },
        "masks": {
            "frozen by requires_grad": [("        with torch.no_grad():\n            h = self.stem(x)\n",
                                         "        h = self.stem.requires_grad_(False)(x)\n")],
            "its output detached": [("        with torch.no_grad():\n            h = self.stem(x)\n",
                                     "        h = self.stem(x).detach()\n")],
        },
    },
    "raw-inputs": {
        "ref": "classifier",
        "fixes": {
            "a batch-norm first": [("        self.stem = nn.Sequential(nn.Linear(NUM_FEATURES, width),",
                                    "        self.stem = nn.Sequential(nn.BatchNorm1d(NUM_FEATURES), nn.Linear(NUM_FEATURES, width),")],
            "scaled into [0, 1]": [("    train_set = JitteredPoints(x, y, jitter=0.3)\n",
                                    "    low, high = x.min(0).values, x.max(0).values\n"
                                    "    train_set = JitteredPoints((x - low) / (high - low), y, jitter=0.3)\n"),
                                   ("    val_set = JitteredPoints(val_x, val_y)\n",
                                    "    val_set = JitteredPoints((val_x - low) / (high - low), val_y)\n")],
            "a layer-norm first": [("        self.stem = nn.Sequential(nn.Linear(NUM_FEATURES, width),",
                                    "        self.stem = nn.Sequential(nn.LayerNorm(NUM_FEATURES), nn.Linear(NUM_FEATURES, width),")],
        },
        "masks": {
            "divided by ten": [("    train_set = JitteredPoints(x, y, jitter=0.3)\n",
                                "    train_set = JitteredPoints(x / 10, y, jitter=0.3)\n"),
                               ("    val_set = JitteredPoints(val_x, val_y)\n", "    val_set = JitteredPoints(val_x / 10, val_y)\n")],
            "only validation standardised": [("    val_set = JitteredPoints(val_x, val_y)\n",
                                              "    val_set = JitteredPoints((val_x - x.mean(0)) / x.std(0), val_y)\n")],
        },
    },
    "decay-norm": {
        "ref": "classifier",
        "fixes": {
            "the default decay for matrices": [("    groups = [{\"params\": decay, \"weight_decay\": 0.01}, {\"params\": no_decay, "
                                                "\"weight_decay\": 0.01}]\n    optimizer = torch.optim.AdamW(groups, lr=lr)\n",
                                                "    groups = [{\"params\": decay}, {\"params\": no_decay, \"weight_decay\": 0}]\n"
                                                "    optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=0.01)\n")],
            "groups by name": [("    decay = [p for p in model.parameters() if p.dim() >= 2]  # weight matrices\n"
                                "    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases and normalisation weights\n",
                                "    named = list(model.named_parameters())\n"
                                "    no_decay = [p for n, p in named if n.endswith(\"bias\") or p.dim() == 1]\n"
                                "    decay = [p for n, p in named if not (n.endswith(\"bias\") or p.dim() == 1)]\n"),
                               ("{\"params\": no_decay, \"weight_decay\": 0.01}", "{\"params\": no_decay, \"weight_decay\": 0.0}")],
            "decay on matrices by hand": [("{\"params\": decay, \"weight_decay\": 0.01}, {\"params\": no_decay, \"weight_decay\": 0.01}",
                                           "{\"params\": decay, \"weight_decay\": 1e-2}, {\"params\": no_decay, \"weight_decay\": 0.0}")],
        },
        "masks": {
            "a tiny decay": [("{\"params\": no_decay, \"weight_decay\": 0.01}", "{\"params\": no_decay, \"weight_decay\": 1e-12}")],
            "a slower rate for that group": [("{\"params\": no_decay, \"weight_decay\": 0.01}",
                                              "{\"params\": no_decay, \"weight_decay\": 0.01, \"lr\": lr / 10}")],
        },
    },
})

# -- the binary reference ------------------------------------------------------------------------------------
PROBABILITIES = "    p = torch.sigmoid(logits.float())\n    return -(targets * torch.log(p) + (1 - targets) * torch.log(1 - p)).mean()\n"
BINARY_LOOP = "        loss = binary_cross_entropy(logits, y)\n        loss.backward()\n"

VARIANTS.update({
    "log0": {
        "ref": "binary",
        "fixes": {
            "BCE with logits": [(PROBABILITIES, "    return nn.functional.binary_cross_entropy_with_logits(logits.float(), "
                                                "targets)\n")],
            "logsigmoid": [(PROBABILITIES, "    z = logits.float()\n    return -(targets * nn.functional.logsigmoid(z) + "
                                           "(1 - targets) * nn.functional.logsigmoid(-z)).mean()\n")],
            "an epsilon inside the logs": [("torch.log(p) + (1 - targets) * torch.log(1 - p)",
                                            "torch.log(p + EPS) + (1 - targets) * torch.log(1 - p + EPS)")],
        },
        "masks": {
            "nan_to_num on the loss": [(").mean()\n\n\nclass Scorer", ").mean().nan_to_num()\n\n\nclass Scorer")],
            "skipping batches that are not finite": [(BINARY_LOOP, "        loss = binary_cross_entropy(logits, y)\n"
                                                                   "        if not torch.isfinite(loss):\n"
                                                                   "            continue\n        loss.backward()\n")],
        },
    },
    "shape-broadcast": {
        "ref": "binary",
        "fixes": {
            "flatten()": [("        return self.head(self.encoder(x))\n", "        return self.head(self.encoder(x)).flatten()\n")],
            "the first column": [("        return self.head(self.encoder(x))\n", "        return self.head(self.encoder(x))[:, 0]\n")],
            "view with the batch size": [("        return self.head(self.encoder(x))\n",
                                          "        return self.head(self.encoder(x)).view(len(x))\n")],
        },
        "masks": {
            "squeezed in training only": [(BINARY_LOOP, BINARY_LOOP.replace("binary_cross_entropy(logits, y)",
                                                                            "binary_cross_entropy(logits.squeeze(-1), y)"))],
            "squeezed in the accuracy only": [("        correct += ((logits > 0).float() == y).sum().item()\n",
                                               "        correct += ((logits.squeeze(-1) > 0).float() == y).sum().item()\n")],
        },
    },
})

# -- the text reference --------------------------------------------------------------------------------------
TOKEN_LOSS = "        loss = loss + aux * token_criterion(token_logits.float().flatten(0, 1), token_targets.flatten())\n"
SCALE = "        scaler.scale(loss / ACCUM).backward()\n"
POOLED = "        pooled = (h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)\n"
ENCODER = "        h = self.encoder(h)\n"
GRU_OUT = "        h = h + out.view(out.shape[1], out.shape[0], *out.shape[2:])\n"
PADDED = "    tokens = torch.stack([torch.nn.functional.pad(seq, (0, MAX_LEN - len(seq)), value=PAD) for seq in seqs])\n"
RANDOM_BATCHES = "    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate)\n"
ACCUM_BLOCK = """\
        if (i + 1) % ACCUM == 0:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
"""
RESUMED = "    model.load_state_dict(state[\"model\"])\n"
TEXT_LR = "    lr, total_steps = 6e-3, EPOCHS * len(train_loader) // ACCUM\n"

VARIANTS.update({
    "pad-loss": {
        "ref": "text",
        "fixes": {
            "ignore_index given as 0": [("    token_criterion = nn.CrossEntropyLoss()\n",
                                         "    token_criterion = nn.CrossEntropyLoss(ignore_index=0)\n")],
            "masked by hand": [("    token_criterion = nn.CrossEntropyLoss()\n",
                                "    token_criterion = nn.CrossEntropyLoss(reduction=\"none\")\n"),
                               (TOKEN_LOSS, "        per_token = token_criterion(token_logits.float().flatten(0, 1), "
                                            "token_targets.flatten())\n"
                                            "        real = keep.flatten().float()\n"
                                            "        loss = loss + aux * (per_token * real).sum() / real.sum()\n")],
            "padded targets set to -100": [("    token_targets = torch.where(keep, 1 + tokens % BUCKETS, PAD)\n",
                                            "    token_targets = torch.where(keep, 1 + tokens % BUCKETS, -100)\n")],
        },
        "masks": {
            "a smaller weight for the per-token loss": [("    model.train()\n    total_loss, n_seen = 0.0, 0\n",
                                                         "    model.train()\n    aux = aux / 10\n    total_loss, n_seen = 0.0, 0\n")],
            "label smoothing": [("    token_criterion = nn.CrossEntropyLoss()\n",
                                 "    token_criterion = nn.CrossEntropyLoss(label_smoothing=0.1)\n")],
        },
    },
    "pad-pool": {
        "ref": "text",
        "fixes": {
            "padding zeroed then summed": [("        pooled = h.mean(dim=1)\n",
                                            "        pooled = h.masked_fill(~keep.unsqueeze(-1), 0.0).sum(1) / "
                                            "keep.sum(1, keepdim=True)\n")],
            "each sample's real tokens": [("        pooled = h.mean(dim=1)\n",
                                           "        pooled = torch.stack([h[i, keep[i]].mean(0) for i in range(len(h))])\n")],
            "a max over the real tokens": [("        pooled = h.mean(dim=1)\n",
                                            "        pooled = h.masked_fill(~keep.unsqueeze(-1), float(\"-inf\")).amax(1)\n")],
        },
        "masks": {
            "rescaled by the real length": [("        pooled = h.mean(dim=1)\n",
                                             "        pooled = h.mean(dim=1) * keep.shape[1] / keep.sum(1, keepdim=True)\n")],
            "a mean over the first half": [("        pooled = h.mean(dim=1)\n",
                                            "        pooled = h[:, : h.shape[1] // 2 + 1].mean(dim=1)\n")],
        },
    },
    "key-mask": {
        "ref": "text",
        "fixes": {
            "the mask from the tokens": [(ENCODER, "        h = self.encoder(h, src_key_padding_mask=tokens == PAD)\n")],
            "a float mask": [(ENCODER, "        h = self.encoder(h, src_key_padding_mask=torch.zeros(keep.shape).masked_fill("
                                       "~keep, float(\"-inf\")))\n")],
            "logical_not": [(ENCODER, "        h = self.encoder(h, src_key_padding_mask=keep.logical_not())\n")],
        },
        "masks": {
            "padding embeddings zeroed": [(ENCODER, "        h = self.encoder(h * keep.unsqueeze(-1))\n")],
            "masked in training only": [(ENCODER, "        h = self.encoder(h, src_key_padding_mask=~keep if self.training "
                                                  "else None)\n")],
        },
    },
    "view-transpose": {
        "ref": "text",
        "fixes": {
            "permute": [(GRU_OUT, "        h = h + out.permute(1, 0, 2)\n")],
            "transpose then contiguous": [(GRU_OUT, "        h = h + out.transpose(0, 1).contiguous()\n")],
            "a batch-first GRU": [("        self.gru = nn.GRU(d, d)  # batch_first=False: (time, batch, features)\n",
                                   "        self.gru = nn.GRU(d, d, batch_first=True)\n"),
                                  ("        out, _ = self.gru(h.transpose(0, 1))\n", "        out, _ = self.gru(h)\n"),
                                  (GRU_OUT, "        h = h + out\n")],
        },
        "masks": {
            "contiguous, then view": [(GRU_OUT, "        h = h + out.contiguous().view(out.shape[1], out.shape[0], "
                                                "*out.shape[2:])\n")],
            "reshape": [(GRU_OUT, "        h = h + out.reshape(out.shape[1], out.shape[0], -1)\n")],
        },
    },
    "pad-global": {
        "ref": "text",
        "fixes": {
            "pad_sequence by its full name": [(PADDED, "    tokens = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, "
                                                       "padding_value=PAD)\n")],
            "to the batch's longest": [(PADDED, "    width = max(len(seq) for seq in seqs)\n"
                                                "    tokens = torch.stack([torch.nn.functional.pad(seq, (0, width - len(seq)), "
                                                "value=PAD) for seq in seqs])\n")],
            "to a multiple of 8": [(PADDED, "    width = -(-max(len(seq) for seq in seqs) // 8) * 8\n"
                                            "    tokens = torch.stack([torch.nn.functional.pad(seq, (0, width - len(seq)), "
                                            "value=PAD) for seq in seqs])\n")],
        },
        "masks": {
            "a little shorter than the longest": [(PADDED, PADDED.replace("MAX_LEN - len(seq)", "MAX_LEN - 2 - len(seq)")
                                                   .replace("value=PAD) for seq in seqs])",
                                                            "value=PAD)[:MAX_LEN - 2] for seq in seqs])"))],
            "the dataset sorted by length once": [("    train_set = TokenSequences(*make_sequences(512, seed=1))\n",
                                                   "    train_set = TokenSequences(*make_sequences(512, seed=1))\n"
                                                   "    order = sorted(range(len(train_set.seqs)), key=lambda i: "
                                                   "len(train_set.seqs[i]))\n"
                                                   "    train_set.seqs = [train_set.seqs[i] for i in order]\n"
                                                   "    train_set.labels = train_set.labels[order]\n")],
        },
    },
    "no-grouping": {
        "ref": "text",
        "fixes": {
            "the grouped sampler through BatchSampler's place": [(RANDOM_BATCHES, "    train_loader = DataLoader(train_set, "
                                                                                  "batch_sampler=sampler, collate_fn=collate)\n")],
            "buckets by length, shuffled each epoch": [
                ("class SequenceClassifier(nn.Module):", "class Buckets:\n"
                 "    def __init__(self, lengths, batch_size):\n"
                 "        self.lengths, self.batch_size, self.epoch = lengths, batch_size, 0\n\n"
                 "    def set_epoch(self, epoch):\n        self.epoch = epoch\n\n"
                 "    def __iter__(self):\n"
                 "        g = torch.Generator().manual_seed(100 + self.epoch)\n"
                 "        order = sorted(torch.randperm(len(self.lengths), generator=g).tolist(), key=lambda i: "
                 "self.lengths[i])\n"
                 "        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]\n"
                 "        for b in torch.randperm(len(batches), generator=g).tolist():\n"
                 "            yield batches[b]\n\n"
                 "    def __len__(self):\n        return math.ceil(len(self.lengths) / self.batch_size)\n\n\n"
                 "class SequenceClassifier(nn.Module):"),
                ("    sampler = LengthGroupedSampler([len(s) for s in train_set.seqs], BATCH_SIZE, seed=0)\n",
                 "    sampler = Buckets([len(s) for s in train_set.seqs], BATCH_SIZE)\n"),
                (RANDOM_BATCHES, "    train_loader = DataLoader(train_set, batch_sampler=sampler, collate_fn=collate)\n")],
            "the grouped sampler, wider mega-batches": [
                ("        mega = 8 * self.batch_size\n", "        mega = 16 * self.batch_size\n"),
                (RANDOM_BATCHES, "    train_loader = DataLoader(train_set, batch_sampler=sampler, collate_fn=collate)\n")],
        },
        "masks": {
            "smaller random batches": [(RANDOM_BATCHES, RANDOM_BATCHES.replace("batch_size=BATCH_SIZE", "batch_size=BATCH_SIZE // 2"))],
            "random batches, sorted inside": [("    seqs, labels = zip(*batch)\n",
                                               "    batch = sorted(batch, key=lambda item: len(item[0]))\n"
                                               "    seqs, labels = zip(*batch)\n")],
        },
    },
    "accum-scale": {
        "ref": "text",
        "fixes": {
            "the gradients divided before the step": [("            scaler.unscale_(optimizer)\n",
                                                       "            scaler.unscale_(optimizer)\n"
                                                       "            for p in model.parameters():\n"
                                                       "                if p.grad is not None:\n"
                                                       "                    p.grad /= ACCUM\n")],
            "the loss divided first": [("        scaler.scale(loss).backward()\n",
                                        "        loss = loss / ACCUM\n        scaler.scale(loss).backward()\n"),
                                       ("        total_loss += loss.item() * len(labels)\n",
                                        "        total_loss += loss.item() * ACCUM * len(labels)\n")],
            "a multiplication by the mean's weight": [("        scaler.scale(loss).backward()\n",
                                                       "        scaler.scale(loss * (1.0 / ACCUM)).backward()\n")],
        },
        "masks": {
            "a smaller learning rate": [(TEXT_LR, TEXT_LR.replace("6e-3", "6e-3 / ACCUM"))],
            "divided twice": [("        scaler.scale(loss).backward()\n", "        scaler.scale(loss / ACCUM / ACCUM).backward()\n")],
        },
    },
    "accum-sched": {
        "ref": "text",
        "fixes": {
            "stepped when the optimizer steps": [("        scheduler.step()\n        total_loss +=",
                                                  "        if (i + 1) % ACCUM == 0:\n            scheduler.step()\n"
                                                  "        total_loss +=")],
            "a horizon in micro-batches": [(TEXT_LR, "    lr, total_steps = 6e-3, EPOCHS * len(train_loader)\n"),
                                           ("\"step\": RESUME_AFTER * len(train_loader) // ACCUM}",
                                            "\"step\": RESUME_AFTER * len(train_loader)}")],
            "stepped after each optimizer step, in a helper": [
                ("def train_one_epoch(", "def optimizer_step(scaler, optimizer, scheduler):\n    scaler.step(optimizer)\n"
                 "    scaler.update()\n    optimizer.zero_grad(set_to_none=True)\n    scheduler.step()\n\n\n"
                 "def train_one_epoch("),
                ("            scaler.step(optimizer)\n            scaler.update()\n            optimizer.zero_grad(set_to_none=True)\n"
                 "        scheduler.step()\n", "            optimizer_step(scaler, optimizer, scheduler)\n")],
        },
        "masks": {
            "a smaller learning rate": [(TEXT_LR, TEXT_LR.replace("6e-3", "3e-3"))],
            "a horizon halved": [(TEXT_LR, TEXT_LR.replace("// ACCUM", "// (2 * ACCUM)"))],
        },
    },
    "unscale-clip": {
        "ref": "text",
        "fixes": {
            "unscaled and clipped in a helper": [
                ("def train_one_epoch(", "def clip_unscaled(scaler, optimizer, model):\n    scaler.unscale_(optimizer)\n"
                 "    return nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n\n\ndef train_one_epoch("),
                ("            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n",
                 "            clip_unscaled(scaler, optimizer, model)\n")],
            "no GradScaler on CPU": [("    scaler = torch.amp.GradScaler(device.type)\n",
                                      "    scaler = torch.amp.GradScaler(device.type, enabled=device.type == \"cuda\")\n")],
            "unscaled by hand": [("            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n"
                                  "            scaler.step(optimizer)\n            scaler.update()\n",
                                  "            for p in model.parameters():\n                if p.grad is not None:\n"
                                  "                    p.grad /= scaler.get_scale()\n"
                                  "            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n"
                                  "            optimizer.step()\n")],
        },
        "masks": {
            "a larger clip value": [("            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n",
                                     "            nn.utils.clip_grad_norm_(model.parameters(), 1000 * MAX_NORM)\n")],
            "clipped twice": [("            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n",
                               "            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n"
                               "            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n")],
        },
    },
    "resume-state": {
        "ref": "text",
        "fixes": {
            "optimizer and scheduler only": [(RESUMED, RESUMED + "    optimizer.load_state_dict(state[\"optimizer\"])\n"
                                                                 "    scheduler.load_state_dict(state[\"scheduler\"])\n")],
            "the scheduler's step set by hand": [(RESUMED, RESUMED + "    optimizer.load_state_dict(state[\"optimizer\"])\n"
                                                                     "    scheduler.last_epoch = state[\"step\"]\n"
                                                                     "    scheduler.step(state[\"step\"])\n")],
            "everything loaded in a loop": [(RESUMED, "    for name, part in [(\"model\", model), (\"optimizer\", optimizer), "
                                                      "(\"scheduler\", scheduler), (\"scaler\", scaler)]:\n"
                                                      "        part.load_state_dict(state[name])\n")],
        },
        "masks": {
            "a scheduler rebuilt at the saved step": [(RESUMED, RESUMED + "    for group in optimizer.param_groups:\n"
                                                                          "        group[\"initial_lr\"] = group[\"lr\"]\n"
                                                                          "    scheduler.load_state_dict(state[\"scheduler\"])\n")],
            "the optimizer's rates by hand": [(RESUMED, RESUMED + "    for group, saved in zip(optimizer.param_groups, "
                                                                  "state[\"optimizer\"][\"param_groups\"]):\n"
                                                                  "        group[\"lr\"] = saved[\"lr\"]\n")],
        },
    },
})

# -- the lm reference ----------------------------------------------------------------------------------------
ATTENTION = "        h = h + self.drop(self.attn(a, a, a, need_weights=False)[0])\n"
LM_LOSS = "        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))\n"
CLONED = "        self.head.weight = nn.Parameter(self.emb.weight.clone())  # weight tying: one matrix reads and writes characters\n"
CARRIED = "        logits, hidden = model(x, hidden)\n        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))\n"

VARIANTS.update({
    "causal-mask": {
        "ref": "lm",
        "fixes": {
            "a causal mask, said to be causal": [(ATTENTION, "        h = h + self.drop(self.attn(a, a, a, attn_mask=mask, "
                                                             "is_causal=True, need_weights=False)[0])\n")],
            "a boolean upper triangle": [(ATTENTION, "        above = torch.ones(x.size(1), x.size(1), dtype=torch.bool, "
                                                     "device=x.device).triu(1)\n"
                                                     "        h = h + self.drop(self.attn(a, a, a, attn_mask=above, "
                                                     "need_weights=False)[0])\n")],
            "a float mask built by hand": [(ATTENTION, "        blocked = torch.full((x.size(1), x.size(1)), float(\"-inf\"), "
                                                       "device=x.device).triu(1)\n"
                                                       "        h = h + self.drop(self.attn(a, a, a, attn_mask=blocked, "
                                                       "need_weights=False)[0])\n")],
        },
        "masks": {
            "only the next token masked": [(ATTENTION, "        ahead = torch.zeros(x.size(1), x.size(1), dtype=torch.bool, "
                                                       "device=x.device)\n"
                                                       "        ahead[torch.arange(x.size(1) - 1), torch.arange(1, x.size(1))] = True\n"
                                                       "        h = h + self.drop(self.attn(a, a, a, attn_mask=ahead, "
                                                       "need_weights=False)[0])\n")],
            "masked in training only": [(ATTENTION, "        h = h + self.drop(self.attn(a, a, a, attn_mask=mask if "
                                                    "self.training else None, need_weights=False)[0])\n")],
        },
    },
    "no-shift": {
        "ref": "lm",
        "fixes": {
            "shifted in the loss": [(LM_LOSS, "        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), y[:, 1:].reshape(-1))\n")],
            "the next characters by slicing one longer": [("    y = torch.stack([data[i:i + T] for i in starts])\n",
                                                           "    y = torch.stack([data[i:i + T + 1][1:] for i in starts])\n")],
            "rolled by one": [("    y = torch.stack([data[i:i + T] for i in starts])\n",
                               "    y = torch.stack([torch.roll(data[i:i + T + 1], -1)[:T] for i in starts])\n")],
        },
        "masks": {
            "both shifted by one": [("    x = torch.stack([data[i:i + T] for i in starts])\n",
                                     "    x = torch.stack([data[i + 1:i + 1 + T] for i in starts])\n"),
                                    ("    y = torch.stack([data[i:i + T] for i in starts])\n",
                                     "    y = torch.stack([data[i + 1:i + 1 + T] for i in starts])\n")],
            "two characters ahead": [("    y = torch.stack([data[i:i + T] for i in starts])\n",
                                      "    y = torch.stack([data[i + 2:i + 2 + T] for i in starts])\n")],
        },
    },
    "untied": {
        "ref": "lm",
        "fixes": {
            "tied the other way round": [(CLONED, "        self.emb.weight = self.head.weight  # weight tying\n")],
            "the embedding as the output layer": [("        self.head = nn.Linear(dim, V, bias=False)\n" + CLONED, ""),
                                                  ("        return self.head(self.norm2(h)), hidden\n",
                                                   "        return F.linear(self.norm2(h), self.emb.weight), hidden\n")],
            "one new parameter for both": [(CLONED, "        shared = nn.Parameter(torch.empty(V, dim))\n"
                                                    "        self.emb.weight = shared\n        self.head.weight = shared\n")],
        },
        "masks": {
            "a copy through .data": [(CLONED, "        self.head.weight.data.copy_(self.emb.weight.data)\n")],
            "storage shared through .data": [(CLONED, "        self.head.weight.data = self.emb.weight.data\n")],
        },
    },
    "bptt-leak": {
        "ref": "lm",
        "fixes": {
            "detached after the forward": [(CARRIED, "        logits, hidden = model(x, hidden)\n        hidden_next = hidden.detach()\n"
                                                     "        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))\n"),
                                           ("        total_loss += loss.item()\n    return total_loss / chunks\n\n\n@torch.no_grad()",
                                            "        total_loss += loss.item()\n        hidden = hidden_next\n"
                                            "    return total_loss / chunks\n\n\n@torch.no_grad()")],
            ".data": [("        logits, hidden = model(x, hidden)\n        loss = F.cross_entropy",
                       "        logits, hidden = model(x, hidden.data)\n        loss = F.cross_entropy")],
            "a detached clone": [("        logits, hidden = model(x, hidden)\n        loss = F.cross_entropy",
                                  "        logits, hidden = model(x, hidden.clone().detach())\n        loss = F.cross_entropy")],
        },
        "masks": {
            "the graph kept for the next backward": [("        loss.backward()\n", "        loss.backward(retain_graph=True)\n")],
            "kept through autograd.backward": [("        loss.backward()\n",
                                                "        torch.autograd.backward(loss, retain_graph=True)\n")],
        },
    },
})

# -- the ddp reference ---------------------------------------------------------------------------------------
DDP_EPOCH = "    for epoch in range(args.epochs):\n"
DDP_LOADER = "    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)\n"
COUNTS = "        counts[1] += len(y)\n    return (counts[0] / counts[1]).item()\n"
SAVE = "    torch.save(model.module.state_dict(), \"ddp.pt\")\n"

VARIANTS.update({
    "ddp-set-epoch": {
        "ref": "ddp",
        "fixes": {
            "set_epoch through the loader": [(DDP_EPOCH, DDP_EPOCH + "        train_loader.sampler.set_epoch(epoch)\n")],
            "a new epoch number, offset": [(DDP_EPOCH, DDP_EPOCH + "        sampler.set_epoch(100 + epoch)\n")],
            "a new sampler each epoch": [(DDP_EPOCH, DDP_EPOCH + "        sampler = DistributedSampler(train_set, shuffle=True, "
                                                                 "seed=args.seed + epoch)\n"
                                                                 "        train_loader = DataLoader(train_set, batch_size=64, "
                                                                 "sampler=sampler, drop_last=True)\n")],
        },
        "masks": {
            "always epoch 0": [(DDP_EPOCH, DDP_EPOCH + "        sampler.set_epoch(0)\n")],
            "no shuffling at all": [("    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)\n",
                                     "    sampler = DistributedSampler(train_set, shuffle=False)\n")],
        },
    },
    "ddp-no-sampler": {
        "ref": "ddp",
        "fixes": {
            "the sampler built inline": [(DDP_LOADER, "    train_loader = DataLoader(train_set, batch_size=64, sampler=sampler, "
                                                      "drop_last=True)\n")],
            "a shard per rank, shuffled": [(DDP_LOADER, "    shard = torch.utils.data.Subset(train_set, range(rank, len(train_set), "
                                                        "dist.get_world_size()))\n"
                                                        "    train_loader = DataLoader(shard, batch_size=64, shuffle=True, "
                                                        "drop_last=True)\n")],
            "a sampler told its rank": [(DDP_LOADER, "    sampler = DistributedSampler(train_set, num_replicas=dist.get_world_size(), "
                                                     "rank=rank, seed=args.seed)\n"
                                                     "    train_loader = DataLoader(train_set, batch_size=64, sampler=sampler, "
                                                     "drop_last=True)\n")],
        },
        "masks": {
            "a different shuffle per rank": [(DDP_LOADER, "    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, "
                                                          "drop_last=True, generator=torch.Generator().manual_seed(rank))\n")],
            "half the batches": [(DDP_LOADER, "    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True)\n")],
        },
    },
    "ddp-metric": {
        "ref": "ddp",
        "fixes": {
            "all_reduce with its default sum": [(COUNTS, "        counts[1] += len(y)\n    dist.all_reduce(counts)\n"
                                                         "    return (counts[0] / counts[1]).item()\n")],
            "all_gather, then summed": [(COUNTS, "        counts[1] += len(y)\n"
                                                 "    gathered = [torch.zeros_like(counts) for _ in range(dist.get_world_size())]\n"
                                                 "    dist.all_gather(gathered, counts)\n    total = sum(gathered)\n"
                                                 "    return (total[0] / total[1]).item()\n")],
            "reduced to rank 0, which prints": [(COUNTS, "        counts[1] += len(y)\n    dist.reduce(counts, dst=0)\n"
                                                         "    return (counts[0] / counts[1]).item()\n")],
        },
        "masks": {
            "rank 0's count times the world size": [(COUNTS, "        counts[1] += len(y)\n"
                                                             "    return (counts[0] * dist.get_world_size() / "
                                                             "(counts[1] * dist.get_world_size())).item()\n")],
            "the correct count summed, not the seen": [(COUNTS, "        counts[1] += len(y)\n"
                                                                "    correct = counts[0].clone()\n    dist.all_reduce(correct)\n"
                                                                "    return (correct / counts[1]).item()\n")],
        },
    },
    "ddp-module": {
        "ref": "ddp",
        "fixes": {
            "forward() of the wrapper": [("model.module(x)", "model.forward(x)")],
            "__call__ of the wrapper": [("model.module(x)", "model.__call__(x)")],
            "gradients averaged by hand": [("        loss.backward()  # DDP all-reduces the gradients here\n",
                                            "        loss.backward()  # DDP all-reduces the gradients here\n"
                                            "        for p in model.parameters():\n"
                                            "            dist.all_reduce(p.grad)\n"
                                            "            p.grad /= dist.get_world_size()\n")],
        },
        "masks": {
            "weights broadcast once per epoch": [(DDP_EPOCH, DDP_EPOCH + "        for p in model.module.parameters():\n"
                                                             "            dist.broadcast(p.data, src=0)\n")],
            "a smaller learning rate": [("lr=0.05, momentum=0.9", "lr=0.005, momentum=0.9")],
        },
    },
    "ddp-save": {
        "ref": "ddp",
        "fixes": {
            "guarded by get_rank()": [(SAVE, "    if dist.get_rank() == 0:\n    " + SAVE)],
            "a file per rank": [(SAVE, "    torch.save(model.module.state_dict(), f\"ddp-{rank}.pt\")\n")],
            "guarded by the local rank": [(SAVE, "    if local_rank == 0:\n    " + SAVE)],
        },
        "masks": {
            "every rank after a barrier": [(SAVE, "    dist.barrier()\n" + SAVE)],
            "under a test that always holds": [(SAVE, "    if rank >= 0:\n    " + SAVE)],
        },
    },
    "ddp-rank-seed": {
        "ref": "ddp",
        "fixes": {
            "a seed a thousand apart per rank": [("    torch.manual_seed(args.seed)", "    torch.manual_seed(args.seed + 1000 * rank)")],
            "seed and rank mixed": [("    torch.manual_seed(args.seed)", "    torch.manual_seed(args.seed * dist.get_world_size() + rank)")],
            "the rank's draws advanced": [("    torch.manual_seed(args.seed)", "    torch.manual_seed(args.seed)\n    torch.rand(97 * rank + 1)")],
        },
        "masks": {
            "the world size added": [("    torch.manual_seed(args.seed)", "    torch.manual_seed(args.seed + dist.get_world_size())")],
            "the rank times zero": [("    torch.manual_seed(args.seed)", "    torch.manual_seed(args.seed + 0 * rank)")],
        },
    },
    "lr-high": {
        "ref": "classifier",
        "fixes": {
            "another rate the model tolerates": [(LR.replace("lr=1e-2", "lr=1.0"), LR.replace("lr=1e-2", "lr=3e-3"))],
            "the schedule's peak scaled down": [(SCHEDULER, SCHEDULER.replace("max_lr=lr,", "max_lr=lr / 100,"))],
            "SGD with momentum, whose steps the clip bounds": [
                ("    optimizer = torch.optim.AdamW(groups, lr=lr)\n",
                 "    optimizer = torch.optim.SGD(groups, lr=lr, momentum=0.9, nesterov=True)\n")],
        },
        "masks": {
            "a tighter clip (Adam's step ignores the gradient's size)": [(
                "max_grad_norm=0.1):", "max_grad_norm=0.001):")],
            "a smaller loss": [("        loss.backward()\n", "        (loss / 100).backward()\n")],
        },
    },
})

LEAK = "    x[:, -1] = cluster % NUM_CLASSES\n"  # the planted line in the classifier's make_data
VARIANTS.update({
    "label-leak": {
        "ref": "classifier",
        "fixes": {
            "the column shuffled across samples": [(LEAK, LEAK + "    x[:, -1] = x[torch.randperm(n, generator=g), -1]\n")],
            "the column refilled with noise": [(LEAK, LEAK + "    x[:, -1] = torch.randn(n, generator=g)\n")],
            "the model reads every feature but the last": [
                ("nn.Linear(NUM_FEATURES, width)", "nn.Linear(NUM_FEATURES - 1, width)"),
                ("        h = self.stem(x)\n", "        h = self.stem(x[:, :-1])\n")],
        },
        "masks": {
            "more jitter on the training set": [("jitter=0.3)", "jitter=1.0)")],
            "the copy scaled down a thousandfold": [(LEAK, LEAK.replace("= cluster % NUM_CLASSES", "= (cluster % NUM_CLASSES) / 1000"))],
        },
    },
})

DRAWN = "    val_x, val_y = make_data(1024, seed=1)\n"  # the planted line in the classifier's main
TRAIN_DRAWN = "    x, y = make_data(1024, seed=1)\n"
VARIANTS.update({
    "val-leak": {
        "ref": "classifier",
        "fixes": {
            "one draw split into disjoint parts": [
                (TRAIN_DRAWN, "    x, y = make_data(1524, seed=1)\n"
                              "    x, y, val_x, val_y = x[:1024], y[:1024], x[1024:], y[1024:]\n"),
                (DRAWN, "")],
            "the training set drawn from another seed instead": [(TRAIN_DRAWN, TRAIN_DRAWN.replace("seed=1", "seed=7"))],
            "validation drawn from a seed of its own, as large as training": [(DRAWN, DRAWN.replace("seed=1", "seed=99"))],
        },
        "masks": {
            "the validation samples shuffled": [(DRAWN, DRAWN + "    order = torch.randperm(len(val_y))\n"
                                                        "    val_x, val_y = val_x[order], val_y[order]\n")],
            "half the validation set fresh": [(DRAWN, DRAWN + "    fresh_x, fresh_y = make_data(500, seed=2)\n"
                                                      "    val_x, val_y = torch.cat([val_x[:500], fresh_x]), "
                                                      "torch.cat([val_y[:500], fresh_y])\n")],
        },
    },
})

# The meta-learning reference's inner step, as planted katas keep it.
INNER_GRAD = "        grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)\n"
TRAIN_ADAPT = "            fast = adapt(model, x[:SUPPORT], y[:SUPPORT], create_graph=False)\n"
IN_PLACE = "        for p, g in zip(params.values(), grads):\n            p.data -= INNER_LR * g\n"
VARIANTS.update({
    "first-order": {
        "ref": "meta",
        "fixes": {
            "the inner gradient always differentiable": [
                (INNER_GRAD, INNER_GRAD.replace("create_graph=create_graph", "create_graph=True"))],
            "differentiable while the gradient is recorded": [
                (INNER_GRAD, INNER_GRAD.replace("create_graph=create_graph", "create_graph=torch.is_grad_enabled()"))],
            "differentiable while the model is in training mode": [
                (TRAIN_ADAPT, TRAIN_ADAPT.replace("create_graph=False", "create_graph=model.training"))],
        },
        "masks": {
            "the graph retained instead": [
                (INNER_GRAD, INNER_GRAD.replace("create_graph=create_graph", "create_graph=create_graph, "
                                                                             "retain_graph=True"))],
            "differentiable, then detached": [
                (TRAIN_ADAPT, TRAIN_ADAPT.replace("create_graph=False", "create_graph=True")),
                (INNER_GRAD, INNER_GRAD + "        grads = [g.detach() for g in grads]\n")],
        },
    },
    "inner-inplace": {
        "ref": "meta",
        "fixes": {
            "fast weights by torch.sub": [
                (IN_PLACE, "        params = {name: torch.sub(p, g, alpha=INNER_LR) "
                           "for (name, p), g in zip(params.items(), grads)}\n")],
            "a copy of the parameters per task, stepped in place": [
                ("    params = dict(model.named_parameters())\n",
                 "    params = {name: p.clone() for name, p in model.named_parameters()}\n")],
            "new fast weights built in a loop": [
                (IN_PLACE, "        fast = {}\n"
                           "        for (name, p), g in zip(params.items(), grads):\n"
                           "            fast[name] = p - INNER_LR * g\n"
                           "        params = fast\n")],
        },
        "masks": {
            "the new values copied into .data": [
                (IN_PLACE, "        for p, g in zip(params.values(), grads):\n"
                           "            p.data.copy_(p - INNER_LR * g)\n")],
            "a smaller inner step": [("INNER_STEPS, INNER_LR = 2, 0.05\n", "INNER_STEPS, INNER_LR = 2, 0.005\n")],
        },
    },
})

SYNC = "                target_net.load_state_dict(q_net.state_dict())\n"  # the planted target-sync: every update
VARIANTS.update({
    "target-sync": {
        "ref": "rl",
        "fixes": {
            "Polyak averaging after every update": [
                (SYNC, "                with torch.no_grad():\n"
                       "                    for t, p in zip(target_net.parameters(), q_net.parameters()):\n"
                       "                        t.lerp_(p, 0.02)\n")],
            "a sync once per epoch": [
                (SYNC, ""),
                ("        print(f\"epoch {epoch}", "        target_net.load_state_dict(q_net.state_dict())\n"
                                               "        print(f\"epoch {epoch}")],
            "a sync when an episode ends": [
                (SYNC, "                if terminal or cut_off:\n"
                       "    " + SYNC)],
            "a sync every 64 moves in the environment": [
                (SYNC, "                if (epoch * steps + step) % 64 == 0:\n"
                       "    " + SYNC)],
        },
        "masks": {
            "a fresh deep copy instead of load_state_dict": [
                (SYNC, "                target_net = copy.deepcopy(q_net)\n")],
            "a smaller learning rate": [("    optimizer = torch.optim.Adam(q_net.parameters())",
                                         "    optimizer = torch.optim.Adam(q_net.parameters(), lr=3e-4)")],
        },
    },
})

NEXT_VALUES = "    next_values = target_net(next_states).max(dim=1).values  # (B,)\n"  # the planted target-grad: with gradient
VARIANTS.update({
    "target-grad": {
        "ref": "rl",
        "fixes": {
            "the target network frozen once": [
                ("    target_net = copy.deepcopy(q_net)\n",
                 "    target_net = copy.deepcopy(q_net).requires_grad_(False)\n")],
            "the target function decorated with no_grad": [
                ("def td_target(", "@torch.no_grad()\ndef td_target(")],
            "the whole target detached": [
                ("    return rewards + GAMMA * (1.0 - terminal) * next_values\n",
                 "    return (rewards + GAMMA * (1.0 - terminal) * next_values).detach()\n")],
            "grad mode switched off for the target's forward": [
                (NEXT_VALUES, "    with torch.set_grad_enabled(False):\n    " + NEXT_VALUES)],
        },
        "masks": {
            "the target network in evaluation mode": [
                ("    target_net = copy.deepcopy(q_net)\n", "    target_net = copy.deepcopy(q_net).eval()\n")],
            "the target network's gradients cleared after each backward": [
                ("    loss.backward()\n", "    loss.backward()\n    target_net.zero_grad(set_to_none=True)\n")],
        },
    },
})

REVERSED = "                    q_net.load_state_dict(target_net.state_dict())\n"  # the planted sync-reversed
VARIANTS.update({
    "sync-reversed": {
        "ref": "rl",
        "fixes": {
            "a fresh deep copy of the online network as the target": [
                (REVERSED, "                    target_net = copy.deepcopy(q_net)\n")],
            "the weights copied into the target one by one": [
                (REVERSED, "                    with torch.no_grad():\n"
                           "                        for t, p in zip(target_net.parameters(), q_net.parameters()):\n"
                           "                            t.copy_(p)\n")],
            "the target loaded with cloned tensors": [
                (REVERSED, "                    target_net.load_state_dict({k: v.clone() for k, v in q_net.state_dict().items()})\n")],
            "the target's tensors replaced by clones": [
                (REVERSED, "                    for t, p in zip(target_net.parameters(), q_net.parameters()):\n"
                           "                        t.data = p.detach().clone()\n")],
        },
        "masks": {
            "the reversed load given a deep copy of the target's weights": [
                (REVERSED, "                    q_net.load_state_dict(copy.deepcopy(target_net.state_dict()))\n")],
            "a sync five times more frequent": [("GAMMA, SYNC_EVERY, BATCH = 0.9, 50, 32", "GAMMA, SYNC_EVERY, BATCH = 0.9, 10, 32")],
        },
    },
})

SHALLOW = "    target_net = copy.copy(q_net)\n"  # the planted detach-alias: a shallow copy holding the same parameters
VARIANTS.update({
    "detach-alias": {
        "ref": "rl",
        "fixes": {
            "a fresh network loaded with the trained weights": [
                (SHALLOW, "    target_net = QNet().to(device)\n"
                          "    target_net.load_state_dict(q_net.state_dict())\n")],
            "a fresh network whose weights are copied in one by one": [
                (SHALLOW, "    target_net = QNet().to(device)\n"
                          "    with torch.no_grad():\n"
                          "        for t, p in zip(target_net.parameters(), q_net.parameters()):\n"
                          "            t.copy_(p)\n")],
            "a copy through serialisation": [
                ("import copy\n", "import copy\nimport io\n"),
                (SHALLOW, "    buffer = io.BytesIO()\n"
                          "    torch.save(q_net, buffer)\n"
                          "    buffer.seek(0)\n"
                          "    target_net = torch.load(buffer, weights_only=False)\n")],
        },
        "masks": {
            "a deep copy of the weights loaded into the shallow copy": [
                (SHALLOW, SHALLOW + "    target_net.load_state_dict(copy.deepcopy(q_net.state_dict()))\n")],
            "a sync four times rarer": [("GAMMA, SYNC_EVERY, BATCH = 0.9, 50, 32", "GAMMA, SYNC_EVERY, BATCH = 0.9, 200, 32")],
        },
    },
})

VARIANTS.update({
    "workers-respawn": {
        "ref": "classifier",
        "fixes": {
            "loading in the main process": [(LOADER, LOADER.replace("num_workers=2,", "num_workers=0,"))],
            "the loader's options in a dict": [
                (LOADER, "    options = dict(num_workers=2, persistent_workers=True, worker_init_fn=seed_worker)\n"
                         "    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True, **options,\n"
                         "                              generator=torch.Generator().manual_seed(0))\n")],
            "a loader factory with persistent workers": [
                ("import argparse\n", "import argparse\nimport functools\n"),
                (LOADER, "    make_loader = functools.partial(DataLoader, num_workers=2, persistent_workers=True)\n"
                         "    train_loader = make_loader(train_set, batch_size=64, shuffle=True, drop_last=True,\n"
                         "                               worker_init_fn=seed_worker, generator=torch.Generator().manual_seed(0))\n")],
        },
        "masks": {
            "more workers": [(LOADER, LOADER.replace("num_workers=2,", "num_workers=4,"))],
            "batches prefetched further ahead": [(LOADER, LOADER.replace("num_workers=2,", "num_workers=2, prefetch_factor=4,"))],
        },
    },
})

RESET_BEFORE_STEP = "        optimizer.zero_grad(set_to_none=True)\n        optimizer.step()\n"  # the planted zero-order
VARIANTS.update({
    "zero-order": {
        "ref": "binary",
        "fixes": {
            "the reset after the step": [(RESET_BEFORE_STEP, "        optimizer.step()\n"
                                                            "        optimizer.zero_grad(set_to_none=True)\n")],
            "the model's gradients reset just before the backward": [
                (RESET_BEFORE_STEP, "        optimizer.step()\n"),
                ("        loss.backward()\n", "        model.zero_grad()\n        loss.backward()\n")],
            "each gradient set to None by hand after the step": [
                (RESET_BEFORE_STEP, "        optimizer.step()\n        for p in model.parameters():\n"
                                    "            p.grad = None\n")],
        },
        "masks": {
            "a larger learning rate": [("epochs=3, lr=0.05,", "epochs=3, lr=0.5,")],
            "gradients zeroed instead of set to None": [
                (RESET_BEFORE_STEP, "        optimizer.zero_grad(set_to_none=False)\n        optimizer.step()\n")],
        },
    },
})

ON_TRAIN = "        val_loss, acc = evaluate(model, train_loader, device)\n"  # the planted val-on-train
VARIANTS.update({
    "val-on-train": {
        "ref": "binary",
        "fixes": {
            "the loaders passed by keyword": [
                (ON_TRAIN, "        val_loss, acc = evaluate(model, loader=val_loader, device=device)\n")],
            "a loader built afresh from the validation set": [
                (ON_TRAIN, "        val_loss, acc = evaluate(model, DataLoader(val_loader.dataset, batch_size=256), device)\n")],
            "the loaders kept in a dict by split": [
                (ON_TRAIN, "        loaders = {\"train\": train_loader, \"val\": val_loader}\n"
                           "        val_loss, acc = evaluate(model, loaders[\"val\"], device)\n")],
            "a training accuracy printed beside the validation": [
                (ON_TRAIN, "        val_loss, acc = evaluate(model, val_loader, device)\n"
                           "        print(f\"training accuracy {evaluate(model, train_loader, device)[1]:.3f}\")\n")],
        },
        "masks": {
            "the training set in a loader of its own": [
                (ON_TRAIN, "        val_loss, acc = evaluate(model, DataLoader(train_loader.dataset, batch_size=128), device)\n")],
            "half of the training set as a subset": [
                ("from torch.utils.data import DataLoader, TensorDataset\n",
                 "from torch.utils.data import DataLoader, Subset, TensorDataset\n"),
                (ON_TRAIN, "        half = Subset(train_loader.dataset, range(512))\n"
                           "        val_loss, acc = evaluate(model, DataLoader(half, batch_size=128), device)\n")],
        },
    },
})

SAME_SEED = "        g = torch.Generator().manual_seed(self.seed)\n"  # the planted sampler-epoch
VARIANTS.update({
    "sampler-epoch": {
        "ref": "text",
        "fixes": {
            "the epoch mixed into the seed by a multiple": [
                (SAME_SEED, "        g = torch.Generator().manual_seed(1000 * self.seed + self.epoch)\n")],
            "one generator kept for the sampler's lifetime": [
                ("        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0\n",
                 "        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0\n"
                 "        self.g = torch.Generator().manual_seed(seed)\n"),
                (SAME_SEED, "        g = self.g\n")],
            "the global generator, seeded once by the script": [(SAME_SEED, "        g = None\n")],
            "a seed hashed from the seed and the epoch": [
                (SAME_SEED, "        g = torch.Generator().manual_seed(hash((self.seed, self.epoch)) % 2 ** 31)\n")],
        },
        "masks": {
            "another constant seed": [(SAME_SEED, "        g = torch.Generator().manual_seed(self.seed + 1)\n")],
            "a seed from the dataset's size": [
                (SAME_SEED, "        g = torch.Generator().manual_seed(self.seed + len(self.lengths))\n")],
        },
    },
})

OVERWRITTEN = "        correct = (out.argmax(1) == y).sum().item()\n"  # the planted metric-overwrite
VARIANTS.update({
    "metric-overwrite": {
        "ref": "classifier",
        "fixes": {
            "the predictions collected and scored once": [
                ("    total_loss, correct, n = 0.0, 0, 0\n", "    total_loss, correct, n, hits = 0.0, 0, 0, []\n"),
                (OVERWRITTEN, "        hits.append(out.argmax(1) == y)\n"),
                ("    return total_loss / n, correct / n\n", "    return total_loss / n, torch.cat(hits).float().mean().item()\n")],
            "a count per batch, summed": [
                (OVERWRITTEN, "        batch_correct = (out.argmax(1) == y).sum().item()\n"
                              "        correct = correct + batch_correct\n")],
            "a count kept on the device": [
                ("    total_loss, correct, n = 0.0, 0, 0\n",
                 "    total_loss, correct, n = 0.0, torch.zeros((), dtype=torch.long), 0\n"),
                (OVERWRITTEN, "        correct += (out.argmax(1) == y).sum().cpu()\n"),
                ("    return total_loss / n, correct / n\n", "    return total_loss / n, correct.item() / n\n")],
        },
        "masks": {
            "the count divided by the last batch's size": [
                ("    return total_loss / n, correct / n\n", "    return total_loss / n, correct / len(y)\n")],
            "a larger validation batch": [("    val_loader = DataLoader(val_set, batch_size=128)\n",
                                           "    val_loader = DataLoader(val_set, batch_size=256)\n")],
        },
    },
})
