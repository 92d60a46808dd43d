"""label-shift: a Dataset returns each input with the label of the next item."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, is_self_attribute

DATASET_BASES = {"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"}


class ShiftLabelIndex(Operator):
    """In a ``Dataset`` subclass's ``__getitem__(self, i)``, read the label at ``(i + 1) % len(self.y)``.

    The returned tuple (or dict) is read structurally: its first element is the input, and every element read,
    directly or through local names (``img, target = self.data[i], int(self.targets[i])``), by the item's index
    from an attribute the input does not read is a label. The input must itself come from an attribute read by
    the index (the data source is then in sight), and the label's attribute from ``self.attr[i]``."""

    no_site = ("no Dataset subclass's __getitem__ returns an input and a label both read by the item's index "
               "from its own attributes (self.x[i], self.y[i])")

    def sites(self, ctx: Context) -> list[Site]:
        sites = []
        for cls in ctx.all(cst.ClassDef):
            if not is_dataset_class(ctx, cls.name.value):
                continue
            getitem = next((f for f in cls.body.body if isinstance(f, cst.FunctionDef)
                            and f.name.value == "__getitem__"), None)
            if getitem is None:
                continue
            for subscript in label_reads(getitem):
                sites.append(Site(f"label-shift:{ctx.where(subscript)}:{ctx.code(subscript)}", subscript))
        return sites

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        subscript = site.node
        index = subscript.slice[0].slice.value.value
        attribute = ctx.code(subscript.value)
        shifted = cst.parse_expression(f"({index} + 1) % len({attribute})")
        return rewrite(ctx.module, {subscript.slice[0].slice: lambda node: node.with_changes(value=shifted)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch.utils.data import Dataset


class Points(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]
""",
            after="""\
from torch.utils.data import Dataset


class Points(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[(i + 1) % len(self.y)]
"""), Example(
            before="""\
import torch


class Images(torch.utils.data.Dataset):
    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        return img, target
""",
            after="""\
import torch


class Images(torch.utils.data.Dataset):
    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[(index + 1) % len(self.targets)])
        if self.transform is not None:
            img = self.transform(img)
        return img, target
""")]


def is_dataset_class(ctx: Context, name: str, seen: frozenset = frozenset()) -> bool:
    """Whether the file's class ``name`` subclasses torch's ``Dataset``, directly or through classes of the file."""
    if name in seen or name not in ctx.class_bases:
        return False
    bases = ctx.class_bases[name]
    return bool(bases & DATASET_BASES) or any(is_dataset_class(ctx, b, seen | {name}) for b in bases)


def label_reads(getitem: cst.FunctionDef) -> list[cst.Subscript]:
    """The ``self.attr[i]`` reads that make the labels ``__getitem__`` returns (see ``ShiftLabelIndex``)."""
    params = getitem.params.params
    if len(params) != 2:
        return []
    index = params[1].name.value
    sources = local_sources(getitem)
    found: list[cst.Subscript] = []
    for ret in find(getitem.body, cst.Return):
        elements = returned_elements(ret.value)
        if len(elements) < 2:
            continue
        inputs = indexed_reads(elements[0], index, sources)
        read_by_inputs = {attribute(s) for s in inputs}
        if not inputs:
            continue
        for element in elements[1:]:
            reads = indexed_reads(element, index, sources)
            if reads and not {attribute(s) for s in reads} & read_by_inputs:
                found += [s for s in reads if s not in found]
    return found


def returned_elements(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if isinstance(value, (cst.Tuple, cst.List)):
        return [e.value for e in value.elements]
    if isinstance(value, cst.Dict):
        return [e.value for e in value.elements if isinstance(e, cst.DictElement)]
    return []


def local_sources(function: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    """For each local name, the expressions assigned to it (``a, b = e, f`` pairs them up; ``a += e`` adds ``e``)."""
    sources: dict[str, list[cst.BaseExpression]] = {}
    for node in find(function.body, cst.Assign, cst.AugAssign, cst.AnnAssign):
        if node.value is None:
            continue
        pairs = []
        for target in [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]:
            if isinstance(target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)) \
                    and len(target.elements) == len(node.value.elements):
                pairs += [(t.value, v.value) for t, v in zip(target.elements, node.value.elements)]
            else:
                pairs.append((target, node.value))
        for target, value in pairs:
            if isinstance(target, cst.Name):
                sources.setdefault(target.value, []).append(value)
    return sources


def indexed_reads(expr: cst.BaseExpression, index: str, sources: dict) -> list[cst.Subscript]:
    """``self.attr[index]`` subscripts ``expr`` reads, directly or through the local names it uses."""
    found: list[cst.Subscript] = []
    pending, seen = [expr], set()
    while pending:
        node = pending.pop()
        for n in find(node, cst.Subscript, cst.Name):
            if isinstance(n, cst.Subscript):
                if is_self_attribute(n.value) and len(n.slice) == 1 and isinstance(n.slice[0].slice, cst.Index) \
                        and isinstance(n.slice[0].slice.value, cst.Name) and n.slice[0].slice.value.value == index \
                        and n not in found:
                    found.append(n)
            elif n.value in sources and n.value not in seen:
                seen.add(n.value)
                pending += sources[n.value]
    return found


def attribute(subscript: cst.Subscript) -> str:
    return subscript.value.attr.value


BUG = Bug(
    id="label-shift",
    title="Each input is served with another item's label",
    difficulty="easy",
    observe=("Nothing crashes, the loss goes down a little at first and then hovers near its starting value, and "
             "validation accuracy stays at chance, however long it trains, whatever the learning rate or model."),
    hints=(
        "Take one training example by hand, dataset[i], and check its label against the labels you built the "
        "dataset from.",
        "Compare what dataset[i] returns with the tensors the dataset was given, input and label side by side, for "
        "a few indices.",
        "Look at which index `__getitem__` uses for each element it returns.",
    ),
    why=("The model can only learn what the labels say about the inputs. `__getitem__` reads the input at index i "
         "but the label at i + 1: every input is paired with the label of a different, unrelated item, so the "
         "targets are as good as random with respect to the inputs. The loss can only fall to what predicting the "
         "class frequencies gives, and accuracy stays at chance."),
    fix=("Read the label with the same index as the input: `return x, self.y[i]`. If the inputs really should be "
         "paired with a later item's target (forecasting), store the targets already shifted, so that `__getitem__` "
         "reads both at i."),
    probes=("label-alignment",),
    follow_up=(
        "Which quick test on a Dataset catches this before any training?",
        "Why does the training loss still go down a little?",
        "How would a random_split or a Subset change where such a bug shows?",
        "If only the validation set's labels were shifted, what would the training and validation curves show?",
    ),
    operator=ShiftLabelIndex(),
)
