"""ddp-module: the training forward bypasses the DistributedDataParallel wrapper, so gradients are never averaged
over ranks."""
from __future__ import annotations

import libcst as cst

from katas.bugs.ddp_set_epoch import built, held
from katas.bugs.metric_count import in_scope
from katas.bugs.no_shuffle import reads, targets
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find

DDP = {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}


def assigned_in(ctx: Context, scope: cst.CSTNode) -> list[tuple[list[cst.BaseExpression], cst.BaseExpression]]:
    """(names and attributes written, value) of each assignment in ``scope`` itself."""
    found = []
    for node in [*find(scope, cst.Assign), *find(scope, cst.AugAssign), *find(scope, cst.AnnAssign)]:
        if node.value is not None and in_scope(ctx, node, scope):
            written = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            found.append(([n for t in written for n in targets(t)], node.value))
    return found


def reaches_backward(ctx: Context, call: cst.Call) -> bool:
    """Whether the output of ``call`` flows, through assignments in its function, into a ``backward()`` there:
    as the receiver (``loss.backward()``, ``scaler.scale(loss).backward()``) or an argument
    (``accelerator.backward(loss)``)."""
    scope = ctx.enclosing(call, cst.FunctionDef) or ctx.module
    backwards = [c for c in ctx.calls(scope, "backward") if in_scope(ctx, c, scope)]
    if any(call in set(find(b, cst.Call)) for b in backwards):
        return True
    keys: set = set()
    assignments = assigned_in(ctx, scope)
    for _ in range(10):
        before = set(keys)
        for written, value in assignments:
            if call in set(find(value, cst.Call)) or reads(ctx, value) & keys:
                keys |= {k for n in written if (k := ctx.binding(n)) is not None}
        if keys == before:
            break
    return any(reads(ctx, b) & keys for b in backwards)


class ForwardThroughModule(Operator):
    """Call the wrapped module (``model.module(x)``) instead of the DistributedDataParallel wrapper (``model(x)``)
    in a training forward: a call of a name or ``self`` attribute that holds a ``DistributedDataParallel(...)``
    (followed through assignments and calls into the file's own functions) whose output flows into a
    ``backward()`` in the same function."""

    no_site = "it has no training forward through a DistributedDataParallel wrapper"

    def sites(self, ctx: Context) -> list[Site]:
        keys = held(ctx, built(ctx, *DDP))
        return [Site(f"ddp-module:{ctx.where(call)}:{ctx.code(call)}", call) for call in ctx.all(cst.Call)
                if isinstance(call.func, (cst.Name, cst.Attribute)) and ctx.binding(call.func) in keys
                and reaches_backward(ctx, call)]

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        return rewrite(ctx.module, {site.node: lambda call: call.with_changes(
            func=cst.Attribute(value=call.func, attr=cst.Name("module")))})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(Net().to(device), device_ids=[local_rank])
for x, y in loader:
    logits = model(x.to(device))
    loss = F.cross_entropy(logits, y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
            after="""\
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(Net().to(device), device_ids=[local_rank])
for x, y in loader:
    logits = model.module(x.to(device))
    loss = F.cross_entropy(logits, y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""")]


BUG = Bug(
    id="ddp-module",
    title="The training forward bypasses DistributedDataParallel",
    difficulty="hard",
    observe=("Under `torchrun --nproc-per-node 2` nothing looks wrong: the loss falls, the printed validation "
             "accuracy climbs like a correct run's, and the steps are, if anything, a little faster."),
    hints=(
        "After a few steps, print the sum of one layer's weights on every rank. Should the ranks agree?",
        "DistributedDataParallel averages gradients over ranks during backward. What has to happen in the forward "
        "for it to do that?",
        "Look at which object the training step calls to compute its outputs.",
    ),
    why=("DistributedDataParallel prepares its gradient all-reduce in its own `forward()`: calling the wrapped "
         "`model.module` directly computes the same outputs, but backward then leaves each rank with the gradient "
         "of its own shard only. Every rank steps with different gradients, so the replicas drift apart; rank 0 "
         "saves a model trained on half the data, and evaluation mixes differently trained replicas."),
    fix=("Call the DDP wrapper itself (`model(x)`) in the training forward. Use `model.module` only for what is "
         "not a training forward: reading or saving the state dict, or calling other methods of the model."),
    probes=("rank-params",),
    follow_up=(
        "What do `model.no_sync()` and gradient accumulation have to do with this?",
        "How does DDP keep the replicas equal at the start of training, and what does it broadcast in every "
        "forward?",
        "Why does `find_unused_parameters=True` exist, and what does it cost?",
    ),
    operator=ForwardThroughModule(),
)
