# expect: decay-groups
"""Imitates an older transformers-era fine-tuning script (run_glue-like): dict batches, a model returning
{"loss", "logits"}, AdamW, a WarmupLinearSchedule subclass of LambdaLR stepped per update, periodic evaluation."""
import logging
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler

logging.basicConfig(format="%(asctime)s - %(levelname)s - %(message)s", level=logging.INFO)
logger = logging.getLogger(__name__)

CONFIG = dict(
    seed=42,
    num_labels=3,
    feature_dim=24,
    hidden_size=64,
    hidden_dropout_prob=0.1,
    train_batch_size=32,
    eval_batch_size=64,
    num_train_epochs=4,
    learning_rate=5e-3,
    weight_decay=0.01,
    warmup_proportion=0.1,
    max_grad_norm=0.5,
    logging_steps=20,
)


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


class WarmupLinearSchedule(LambdaLR):
    """Linear warmup from 0 to the base lr over `warmup_steps`, then linear decay to 0 at `t_total`."""

    def __init__(self, optimizer, warmup_steps, t_total, last_epoch=-1):
        self.warmup_steps = warmup_steps
        self.t_total = t_total

        def lr_lambda(step):
            if step < warmup_steps:
                return float(step) / float(max(1, warmup_steps))
            return max(0.0, float(t_total - step) / float(max(1.0, t_total - warmup_steps)))

        super().__init__(optimizer, lr_lambda, last_epoch=last_epoch)


class SentenceFeatures(Dataset):
    """Stand-in for pre-computed sentence embeddings: each example is a dict, as a tokenizer pipeline would give."""

    def __init__(self, n_examples, dim, num_labels, seed):
        g = torch.Generator().manual_seed(seed)
        directions = torch.randn(num_labels, dim, generator=torch.Generator().manual_seed(1234))
        self.labels = torch.randint(0, num_labels, (n_examples,), generator=g)
        strength = 0.6 + 0.4 * torch.rand(n_examples, 1, generator=g)
        self.features = strength * directions[self.labels] + 1.1 * torch.randn(n_examples, dim, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"features": self.features[i], "labels": self.labels[i]}


class FeatureClassifier(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_labels = config["num_labels"]
        self.dense = nn.Linear(config["feature_dim"], config["hidden_size"])
        self.dropout = nn.Dropout(config["hidden_dropout_prob"])
        self.classifier = nn.Linear(config["hidden_size"], config["num_labels"])

    def forward(self, features, labels=None):
        pooled = self.dropout(F.gelu(self.dense(features)))
        logits = self.classifier(pooled)
        outputs = {}
        if labels is not None:
            outputs["loss"] = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        outputs["logits"] = logits
        return outputs


def evaluate(config, model, eval_dataset, device):
    eval_dataloader = DataLoader(eval_dataset, sampler=SequentialSampler(eval_dataset),
                                 batch_size=config["eval_batch_size"])
    eval_loss, nb_eval_steps = 0.0, 0
    preds, out_label_ids = [], []
    model.eval()
    for batch in eval_dataloader:
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.no_grad():
            outputs = model(**batch)
            eval_loss += outputs["loss"].mean().item()
        nb_eval_steps += 1
        preds.append(outputs["logits"].detach().cpu())
        out_label_ids.append(batch["labels"].detach().cpu())
    preds = torch.cat(preds).argmax(dim=1)
    labels = torch.cat(out_label_ids)
    result = {"eval_loss": eval_loss / nb_eval_steps, "acc": (preds == labels).float().mean().item()}
    logger.info("***** Eval results ***** %s", " ".join(f"{k} = {v:.4f}" for k, v in result.items()))
    return result


def train(config, train_dataset, eval_dataset, model, device):
    train_dataloader = DataLoader(train_dataset, sampler=RandomSampler(train_dataset),
                                  batch_size=config["train_batch_size"])
    t_total = len(train_dataloader) * config["num_train_epochs"]

    no_decay = ["bias"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": config["weight_decay"]},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": config["weight_decay"]},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=config["learning_rate"])
    scheduler = WarmupLinearSchedule(optimizer, warmup_steps=int(config["warmup_proportion"] * t_total),
                                     t_total=t_total)

    logger.info("***** Running training *****")
    logger.info("  Num examples = %d, Num Epochs = %d, Total optimization steps = %d",
                len(train_dataset), config["num_train_epochs"], t_total)

    global_step = 0
    tr_loss, logging_loss = 0.0, 0.0
    model.zero_grad()
    for epoch in range(config["num_train_epochs"]):
        for step, batch in enumerate(train_dataloader):
            model.train()
            batch = {k: v.to(device) for k, v in batch.items()}
            outputs = model(**batch)
            loss = outputs["loss"]
            loss.backward()

            tr_loss += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"])
            optimizer.step()
            scheduler.step()
            model.zero_grad()
            global_step += 1

            if global_step % config["logging_steps"] == 0:
                evaluate(config, model, eval_dataset, device)
                logger.info("step %d  lr %.2e  loss %.4f", global_step, scheduler.get_last_lr()[0],
                            (tr_loss - logging_loss) / config["logging_steps"])
                logging_loss = tr_loss

    return global_step, tr_loss / global_step


def main():
    set_seed(CONFIG["seed"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_dataset = SentenceFeatures(960, CONFIG["feature_dim"], CONFIG["num_labels"], seed=1)
    eval_dataset = SentenceFeatures(256, CONFIG["feature_dim"], CONFIG["num_labels"], seed=2)
    model = FeatureClassifier(CONFIG).to(device)
    global_step, avg_loss = train(CONFIG, train_dataset, eval_dataset, model, device)
    logger.info(" global_step = %s, average loss = %s", global_step, avg_loss)
    result = evaluate(CONFIG, model, eval_dataset, device)
    return result


if __name__ == "__main__":
    main()
