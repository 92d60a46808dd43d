"""Tensor kinds a training script may hand to modules, losses and optimizers: sparse (COO, CSR), nested (strided
and jagged), quantized, meta, complex, torch.func transforms, __torch_function__ and wrapper subclasses, and odd
batches. Each part prints RESULT lines; the checked run must print exactly what the plain run prints."""
import os
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
torch.manual_seed(0)


def show(name, value):
    print(f"RESULT {name}: {float(value):.6f}")


class SparseGCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x, adj):
        return torch.sparse.mm(adj, self.lin(x))


def sparse_inputs(layout):
    n = 6
    idx = torch.tensor([[0, 1, 2, 3, 4, 5, 0], [1, 2, 3, 4, 5, 0, 0]])
    adj = torch.sparse_coo_tensor(idx, torch.ones(7), (n, n)).coalesce()
    if layout == "csr":
        adj = adj.to_sparse_csr()
    x, y = torch.randn(n, 4), torch.randint(0, 3, (n,))
    model = SparseGCN()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x, adj), y)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        out = model(x, adj)
    show(f"sparse {layout}", out.sum())


class SparseWeight(nn.Module):
    """A module whose input is a sparse matrix and whose output is sparse too."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 2))

    def forward(self, s):
        return torch.sparse.mm(s, self.w)


def sparse_embedding_grads():
    emb = nn.Embedding(10, 3, sparse=True)
    opt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
    ids = torch.tensor([[1, 2], [3, 4]])
    for _ in range(3):
        opt.zero_grad()
        loss = emb(ids).pow(2).sum()
        loss.backward()
        opt.step()
    show("sparse grads", emb.weight.sum())
    m = SparseWeight()
    s = torch.eye(5).to_sparse()
    show("sparse in/out", m(s).sum())


class Summed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, nt):
        return torch.stack([self.lin(t).sum(0) for t in nt.unbind()])


def nested():
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
    model = Summed()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        loss = model(nt).pow(2).mean()
        loss.backward()
        opt.step()
    show("nested", loss)
    jagged = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged)
    lin = nn.Linear(3, 2)
    out = lin(jagged)
    show("jagged", sum(t.sum() for t in out.unbind()))


class Dequant(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, q):
        return self.lin(q.dequantize())


def quantized():
    q = torch.quantize_per_tensor(torch.randn(3, 4), 0.1, 0, torch.qint8)
    model = Dequant()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        loss = model(q).pow(2).mean()
        loss.backward()
        opt.step()
    show("quantized", loss)
    dyn = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(4, 4)), {nn.Linear}, dtype=torch.qint8)
    show("dynamic quantized", dyn(torch.randn(2, 4)).sum())


def meta():
    with torch.device("meta"):
        big = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    out = big(torch.empty(4, 8, device="meta"))
    print("RESULT meta:", tuple(out.shape), out.device)
    big = big.to_empty(device="cpu")
    for p in big.parameters():
        nn.init.constant_(p, 0.1)
    show("materialised", big(torch.ones(1, 8)).sum())


class ComplexLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4, dtype=torch.cfloat))

    def forward(self, z):
        return z @ self.w


def complex_():
    model = ComplexLayer()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    z, target = torch.randn(8, 4, dtype=torch.cfloat), torch.randn(8, 4, dtype=torch.cfloat)
    for _ in range(3):
        opt.zero_grad()
        loss = (model(z) - target).abs().pow(2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    show("complex", loss)


def functorch():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(5, 3), torch.randn(5, 1)

    def loss_fn(p, xi, yi):
        return F.mse_loss(torch.func.functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    grads = torch.func.vmap(torch.func.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    show("per-sample grads", sum(g.sum() for g in grads.values()))
    jac = torch.func.jacrev(lambda inp: model(inp))(x[0])
    show("jacobian", jac.sum())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        out = torch.func.functional_call(model, dict(model.named_parameters()), (x,))
        loss = F.mse_loss(out, y)
        loss.backward()
        opt.step()
    show("functional_call", loss)


class Logged(torch.Tensor):
    """A __torch_function__ subclass: results stay Logged."""


class Wrapper(torch.Tensor):
    """A wrapper subclass (like DTensor): holds an inner tensor, no storage of its own."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device,
                                                   requires_grad=inner.requires_grad)

    def __init__(self, inner):
        self.inner = inner

    def __repr__(self):
        return f"Wrapper({self.inner})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(t):
            return t.inner if isinstance(t, Wrapper) else t

        args = torch.utils._pytree.tree_map(unwrap, args)
        kwargs = torch.utils._pytree.tree_map(unwrap, kwargs or {})
        out = func(*args, **kwargs)
        return torch.utils._pytree.tree_map(lambda t: Wrapper(t) if isinstance(t, torch.Tensor) else t, out)


def subclasses():
    model = nn.Sequential(nn.Linear(3, 2))
    x = torch.randn(4, 3).as_subclass(Logged)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        out = model(x)
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()
    print("RESULT subclass type:", type(out).__name__)
    show("subclass", loss)
    w = Wrapper(torch.randn(4, 3))
    out = nn.Linear(3, 2)(w)
    print("RESULT wrapper type:", type(out).__name__)
    show("wrapper", out.inner.sum())


def odd_batches():
    model = nn.Sequential(nn.Linear(3, 2))
    show("scalar input", nn.Identity()(torch.tensor(3.0)))
    show("empty batch", model(torch.empty(0, 3)).sum())
    show("bool input", nn.Identity()(torch.tensor([True, False])).sum())
    show("half", model.half()(torch.ones(2, 3, dtype=torch.half)).float().sum())


class Records(torch.utils.data.Dataset):
    """Samples as dicts holding a string, a variable-length tensor and a label."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"id": f"rec-{i}", "seq": torch.randn(2 + i % 3, 3, generator=g), "y": i % 2}


def as_nested(samples):
    return {"id": [s["id"] for s in samples], "seq": torch.nested.nested_tensor([s["seq"] for s in samples]),
            "y": torch.tensor([s["y"] for s in samples])}


def loaders():
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(Records(), batch_size=4, collate_fn=as_nested)
    for _ in range(2):
        for batch in loader:
            opt.zero_grad()
            scores = torch.stack([model(t).mean(0) for t in batch["seq"].unbind()])
            loss = F.cross_entropy(scores, batch["y"])
            loss.backward()
            opt.step()
    show("nested batches", loss)
    padded = torch.utils.data.DataLoader(Records(), batch_size=4,
                                         collate_fn=lambda b: (torch.nested.nested_tensor([s["seq"] for s in b]),
                                                               [s["id"] for s in b]))
    for seqs, ids in padded:
        opt.zero_grad()
        loss = model(seqs.to_padded_tensor(0.0)).pow(2).mean()
        loss.backward()
        opt.step()
    show("padded from nested", loss)


PARTS = {"coo": lambda: sparse_inputs("coo"), "csr": lambda: sparse_inputs("csr"), "sparse_grads": sparse_embedding_grads,
         "nested": nested, "quantized": quantized, "meta": meta, "complex": complex_, "functorch": functorch,
         "subclasses": subclasses, "odd": odd_batches, "loaders": loaders}
for name, part in PARTS.items():
    if os.environ.get("PART", name) != name:
        continue
    try:
        part()
    except Exception as exc:
        print(f"RESULT {name} raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
