"""pad-global: the collate function pads every batch to the dataset's maximum length, not the batch's own."""
from __future__ import annotations

import re

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import names

PAD_SEQUENCE = {"torch.nn.utils.rnn.pad_sequence"}
MAX_NAME = re.compile(r"^(max_?(seq_?)?len(gth)?|len(gth)?_?max|max_?(seq|tokens)|longest(_?len(gth)?)?|block_?size"
                      r"|seq_?len(gth)?|context_?len(gth)?)$", re.IGNORECASE)
FRESH = ("seq", "s", "item", "row")


def max_constants(ctx: Context) -> list[str]:
    """Module-level integer constants named like a maximum sequence length (``MAX_LEN = 24``,
    ``MIN_LEN, MAX_LEN = 4, 24``)."""
    found = []
    for statement in ctx.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for assign in statement.body:
            if not isinstance(assign, cst.Assign):
                continue
            for target in assign.targets:
                pairs = [(target.target, assign.value)]
                if isinstance(target.target, cst.Tuple) and isinstance(assign.value, cst.Tuple) \
                        and len(target.target.elements) == len(assign.value.elements):
                    pairs = [(t.value, v.value) for t, v in zip(target.target.elements, assign.value.elements)]
                found += [t.value for t, v in pairs if isinstance(t, cst.Name) and isinstance(v, cst.Integer)
                          and MAX_NAME.match(t.value)]
    return found


def functional(ctx: Context) -> str | None:
    """How the script can name ``torch.nn.functional``: ``F`` (or its alias), else ``torch.nn.functional``."""
    for imp in ctx.all(cst.Import):
        for alias in imp.names:
            dotted = ctx.code(alias.name)
            if dotted == "torch.nn.functional" and alias.asname is not None:
                return alias.asname.name.value
    for imp in ctx.all(cst.ImportFrom):
        if imp.module is not None and ctx.code(imp.module) == "torch.nn" and not isinstance(imp.names, cst.ImportStar):
            for alias in imp.names:
                if ctx.code(alias.name) == "functional":
                    return alias.asname.name.value if alias.asname else "functional"
    has_torch = any(ctx.code(a.name) == "torch" and a.asname is None for imp in ctx.all(cst.Import) for a in imp.names)
    return "torch.nn.functional" if has_torch else None


def argument(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) > position:
        return positional[position].value
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)


def is_true(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def unused_import(ctx: Context, call: cst.Call) -> dict:
    """Edits that drop ``from ... import pad_sequence`` when ``call`` was its only use (an unused import a linter
    would point at)."""
    if not isinstance(call.func, cst.Name):
        return {}
    name = call.func.value
    if any(n is not call.func and ctx.is_read(n) and not isinstance(ctx.parents.get(n), (cst.ImportAlias, cst.AsName))
           for n in names(ctx.module, name)):
        return {}
    for imp in ctx.all(cst.ImportFrom):
        if isinstance(imp.names, cst.ImportStar):
            continue
        alias = next((a for a in imp.names if (a.asname.name.value if a.asname else ctx.code(a.name)) == name), None)
        if alias is None:
            continue
        kept = [a for a in imp.names if a is not alias]
        line = ctx.parents.get(imp)
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return {imp: lambda node, kept=kept: node.with_changes(names=kept)}
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and not any(
                ll.comment for ll in line.leading_lines):
            return {line: lambda node: cst.RemoveFromParent()}
    return {}


def pads_to_batch_max(call: cst.Call) -> cst.Arg | None:
    """The ``padding=`` argument of a tokenizer-style call that pads to the batch's longest (``padding="longest"``
    or ``padding=True``) while it is given a ``max_length=``."""
    keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
    padding = keywords.get("padding")
    if padding is None or "max_length" not in keywords:
        return None
    value = padding.value
    longest = isinstance(value, cst.SimpleString) and value.evaluated_value == "longest" or is_true(value)
    return padding if longest else None


class PadToGlobalMax(Operator):
    """Replace ``pad_sequence(seqs, batch_first=..., padding_value=v)`` by padding each sequence with ``F.pad`` to a
    module-level maximum-length constant (``MAX_LEN``) and stacking; or turn a tokenizer call's
    ``padding="longest"`` (or ``True``) beside ``max_length=`` into ``padding="max_length"``: every batch becomes as
    wide as the longest sequence the data can hold, whatever its own sequences' lengths."""

    no_site = ("it pads no batch with pad_sequence beside a module-level maximum-length constant (MAX_LEN), nor "
               "calls a tokenizer with padding=\"longest\" and a max_length")

    def sites(self, ctx: Context) -> list[Site]:
        found = [Site(f"pad-global:{ctx.where(call)}:{ctx.code(arg)}", arg) for call in ctx.all(cst.Call)
                 if (arg := pads_to_batch_max(call)) is not None]
        limits = max_constants(ctx)
        if not limits or functional(ctx) is None or not any(
                ctx.code(a.name) == "torch" for imp in ctx.all(cst.Import) for a in imp.names):
            return found
        return [Site(f"pad-global:{ctx.where(call)}:{ctx.code(call)}", call) for call in ctx.all(cst.Call)
                if ctx.is_call_to(call, *PAD_SEQUENCE) and argument(call, "sequences", 0) is not None] + found

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        if isinstance(site.node, cst.Arg):
            return rewrite(ctx.module, {site.node.value: lambda node: cst.SimpleString('"max_length"')})
        call = site.node
        limit, pad = max_constants(ctx)[-1], functional(ctx)
        seqs = argument(call, "sequences", 0)
        value = argument(call, "padding_value", 2)
        scope = ctx.enclosing(call, cst.FunctionDef) or ctx.module
        used = {n.value for n in names(scope)}
        var = next((v for v in FRESH if v not in used), "seq_")
        fill = f", value={ctx.code(value)}" if value is not None else ""
        dim = "" if is_true(argument(call, "batch_first", 1)) else ", dim=1"
        code = f"torch.stack([{pad}.pad({var}, (0, {limit} - len({var})){fill}) for {var} in {ctx.code(seqs)}]{dim})"
        return rewrite(ctx.module, {call: lambda node: cst.parse_expression(code), **unused_import(ctx, call)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
from torch.nn.utils.rnn import pad_sequence

MAX_LEN = 64


def collate(batch):
    seqs, labels = zip(*batch)
    tokens = pad_sequence(seqs, batch_first=True, padding_value=0)
    return tokens, tokens != 0, torch.stack(labels)
""",
            after="""\
import torch

MAX_LEN = 64


def collate(batch):
    seqs, labels = zip(*batch)
    tokens = torch.stack([torch.nn.functional.pad(seq, (0, MAX_LEN - len(seq)), value=0) for seq in seqs])
    return tokens, tokens != 0, torch.stack(labels)
"""), Example(
            before="""\
import torch
import torch.nn.functional as F
from torch.nn.utils import rnn

BLOCK_SIZE = 128


def collate_fn(items):
    xs = [x for x, _ in items]
    return rnn.pad_sequence(xs), torch.tensor([y for _, y in items])
""",
            after="""\
import torch
import torch.nn.functional as F
from torch.nn.utils import rnn

BLOCK_SIZE = 128


def collate_fn(items):
    xs = [x for x, _ in items]
    return torch.stack([F.pad(seq, (0, BLOCK_SIZE - len(seq))) for seq in xs], dim=1), torch.tensor([y for _, y in items])
"""), Example(
            before="""\
def collate(features, tokenizer):
    texts = [f["text"] for f in features]
    return tokenizer(texts, padding="longest", truncation=True, max_length=512, return_tensors="pt")
""",
            after="""\
def collate(features, tokenizer):
    texts = [f["text"] for f in features]
    return tokenizer(texts, padding="max_length", truncation=True, max_length=512, return_tensors="pt")
""")]


BUG = Bug(
    id="pad-global",
    title="Every batch is as wide as the longest sequence in the data",
    difficulty="medium",
    observe=("Training runs and the model learns as well as ever, but an epoch takes far longer than the number "
             "of tokens in the data would suggest. Batches of short sentences cost as much as batches of long "
             "ones."),
    hints=(
        "Print the shape of the token tensor of a few training batches next to the lengths of the sequences in "
        "them. How wide is each batch, and how long is its longest sequence?",
        "Count, per training batch, the positions that hold padding. Where do the padded positions come from, and "
        "what decides how many there are?",
        "Look at how the collate function pads the sequences of a batch: to which length does it pad them?",
    ),
    why=("Every padded position costs the same compute and memory as a real token: the embedding, attention over "
         "it (quadratic in the width), the feed-forward layers, every recurrent step. Padding each batch to a "
         "global maximum (MAX_LEN, a tokenizer's `max_length`) makes a batch of 6-token sequences as expensive as "
         "one of 24-token sequences. With a length-grouped sampler, most batches are much shorter than the "
         "maximum, so padding to it throws away what grouping saved. The loss is unchanged (masks hide the "
         "padding), which is why nothing but the speed shows it."),
    fix=("Pad each batch to its own longest sequence: `pad_sequence(seqs, batch_first=True, padding_value=PAD)`, "
         "or `torch.full((len(seqs), max(map(len, seqs))), PAD)` filled row by row. Rounding the width up to a "
         "multiple of 8 (tensor-core friendly, `pad_to_multiple_of=8`) is fine; rounding up to a large multiple "
         "is not."),
    probes=("padding-waste",),
    follow_up=(
        "When is padding to a fixed length the right choice (think of torch.compile, CUDA graphs, TPUs)?",
        "Why do tokenizers offer pad_to_multiple_of=8, and what does it cost?",
        "How do packed sequences or sequence packing avoid padding altogether, and what do they need from the "
        "attention mask?",
        "Does padding change the loss? What must the model do with padded positions for it not to?",
    ),
    operator=PadToGlobalMax(),
)
