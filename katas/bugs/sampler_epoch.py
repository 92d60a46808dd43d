"""sampler-epoch: a sampler's shuffle is seeded without the epoch that ``set_epoch`` gives it.

Sites: in a class with a ``set_epoch`` method that stores its argument on ``self`` (``self.epoch = epoch``), or
derived from ``DistributedSampler`` (whose ``set_epoch`` stores ``self.epoch``), a call of another method that seeds
a generator (``manual_seed``, ``seed``, ``random.Random``, ``default_rng``, ``RandomState``) whose seed adds that
attribute to something (``self.seed + self.epoch``, ``self.seed + 1000 * self.epoch``). The edit drops the term holding the epoch: every epoch is shuffled with the same
seed, so it draws the same batches in the same order, and ``set_epoch`` changes nothing.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find


DISTRIBUTED_SAMPLER = "torch.utils.data.distributed.DistributedSampler"
SEEDING = {"manual_seed", "seed", "Random", "default_rng", "RandomState"}  # calls that seed a generator


def epoch_attributes(ctx: Context, cls: cst.ClassDef) -> set[str]:
    """The attributes of ``self`` that the class's ``set_epoch(self, epoch)`` sets from its argument; ``epoch`` for
    a subclass of DistributedSampler, which inherits its ``set_epoch``."""
    found = {"epoch"} if DISTRIBUTED_SAMPLER in ctx.class_bases.get(cls.name.value, set()) else set()
    for function in find(cls.body, cst.FunctionDef):
        params = function.params.params
        if function.name.value != "set_epoch" or len(params) < 2:
            continue
        argument = params[1].name.value
        for assign in find(function.body, cst.Assign):
            for target in assign.targets:
                if m.matches(target.target, m.Attribute(value=m.Name("self"))) and \
                        any(n.value == argument for n in find(assign.value, cst.Name)):
                    found.add(target.target.attr.value)
    return found


def seeds(call: cst.Call) -> bool:
    """A call that seeds a generator: ``g.manual_seed(s)``, ``rng.seed(s)``, ``random.Random(s)``,
    ``np.random.default_rng(s)``, ``np.random.RandomState(s)``."""
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else \
        call.func.value if isinstance(call.func, cst.Name) else None
    return name in SEEDING


def holds(node: cst.CSTNode, attributes: set[str]) -> bool:
    """Whether ``node`` reads one of ``self``'s ``attributes``."""
    return any(m.matches(a, m.Attribute(value=m.Name("self"))) and a.attr.value in attributes
               for a in find(node, cst.Attribute))


class SeedWithoutEpoch(Operator):
    """Drop the epoch term from the seed of a sampler's shuffle."""

    no_site = ("no class with set_epoch() seeds a generator with the epoch it stores "
               "(manual_seed(self.seed + self.epoch))")

    def seeds(self, ctx: Context) -> list[tuple[cst.BinaryOperation, cst.BaseExpression]]:
        """(the seed's sum, the operand that stays) of each site."""
        found = []
        for cls in ctx.all(cst.ClassDef):
            attributes = epoch_attributes(ctx, cls)
            if not attributes:
                continue
            for call in find(cls.body, cst.Call):
                if not seeds(call) or len(call.args) != 1 or not isinstance(call.args[0].value, cst.BinaryOperation):
                    continue
                seed = call.args[0].value
                if not isinstance(seed.operator, cst.Add):
                    continue
                left, right = holds(seed.left, attributes), holds(seed.right, attributes)
                if left != right:
                    found.append((seed, seed.left if right else seed.right))
        return found

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"sampler-epoch:{ctx.where(seed)}:{ctx.code(seed)}", seed) for seed, _ in self.seeds(ctx)]

    def mutate(self, ctx: Context, site: Site):
        kept = next(kept for seed, kept in self.seeds(ctx) if seed is site.node)
        return rewrite(ctx.module, {site.node: lambda seed: kept.deep_clone()})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


class ShuffledSampler:
    def __init__(self, n, seed=0):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self):
        return self.n
""",
            after="""\
import torch


class ShuffledSampler:
    def __init__(self, n, seed=0):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self):
        return self.n
""")]


BUG = Bug(
    id="sampler-epoch",
    title="A sampler's shuffle ignores its epoch",
    difficulty="hard",
    observe="Nothing looks wrong: the loss falls and the validation accuracy climbs, as the correct script's do.",
    hints=(
        "Record the first few indices the training loader draws in each epoch. Do they change from one epoch to the "
        "next?",
        "The epoch number is handed to the sampler every epoch. Follow it: what does it change?",
        "The sampler seeds its generator with its seed alone: set_epoch stores the epoch, but the shuffle never "
        "reads it, so every epoch draws the same batches in the same order.",
    ),
    why=("A sampler that shuffles reproducibly seeds a generator of its own at each pass; the seed must change from "
         "epoch to epoch (seed + epoch, as DistributedSampler does), or every pass replays the first one. The batches "
         "then hold the same samples in the same order every epoch: each update sees the same neighbours, the "
         "stochastic gradient noise that shuffling provides is gone, and the model can fit the order itself. Nothing "
         "fails and the loss still falls, a little worse than it should."),
    fix=("Seed the pass with the epoch: `torch.Generator().manual_seed(self.seed + self.epoch)`; or keep one "
         "generator for the sampler's lifetime, so that each pass continues its stream."),
    probes=("epoch-order",),
    follow_up=(
        "Why does DistributedSampler need set_epoch at all, when a plain shuffled DataLoader does not?",
        "How would you test that a sampler yields a different order each epoch, and the same order for the same seed "
        "and epoch?",
        "What changes for resuming a run mid-epoch when the order depends on (seed, epoch)?",
    ),
    operator=SeedWithoutEpoch(),
)
