import torch


class GPT(torch.nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.transformer = torch.nn.ModuleDict(dict(wte=torch.nn.Embedding(vocab, dim)))
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
