"""causal-mask: the causal mask is dropped from a language model's attention, so each position sees the future."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, remove_statements, rewrite
from katas.engine.tree import find, is_self_attribute, method

MASK_KEYWORDS = {"attn_mask", "mask", "tgt_mask"}
CAUSAL_BUILDERS = ("generate_square_subsequent_mask", "triu", "tril")


class DropCausalMask(Operator):
    """Remove what makes attention causal: the argument ``attn_mask=`` (or ``mask=`` / ``tgt_mask=``) bound to a
    square subsequent mask (``generate_square_subsequent_mask``, ``torch.triu`` / ``torch.tril``) or
    ``is_causal=True``; or, in attention written out by hand, the statement ``att = att.masked_fill(<causal>, ...)``
    (or ``att.masked_fill_(...)``) whose condition reads such a mask, directly, through a local name, or through a
    buffer ``self.<name>`` registered from one."""

    no_site = ("its attention is given no causal mask (attn_mask= from triu / tril / a square subsequent mask, "
               "is_causal=True, or scores.masked_fill with such a mask)")

    def causal_buffers(self, ctx: Context) -> set[str]:
        """Attributes of ``self`` that hold a causal mask: ``register_buffer("m", torch.tril(...))``, ``self.m = ...``."""
        found = set()
        for call in ctx.calls(ctx.module, "register_buffer"):
            if len(call.args) >= 2 and isinstance(call.args[0].value, cst.SimpleString) \
                    and any(b in ctx.code(call.args[1].value) for b in CAUSAL_BUILDERS):
                found.add(call.args[0].value.evaluated_value)
        for assign in ctx.all(cst.Assign):
            for target in assign.targets:
                if is_self_attribute(target.target) and any(b in ctx.code(assign.value) for b in CAUSAL_BUILDERS):
                    found.add(target.target.attr.value)
        return found

    def masked_fill(self, ctx: Context, statement: cst.CSTNode, buffers: set[str]) -> bool:
        """``x = x.masked_fill(cond, v)`` or ``x.masked_fill_(cond, v)`` whose ``cond`` reads a causal mask."""
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        small = statement.body[0]
        if isinstance(small, cst.Expr) and method(small.value) == "masked_fill_":
            call = small.value
        elif isinstance(small, cst.Assign) and len(small.targets) == 1 and method(small.value) == "masked_fill" \
                and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value.func.value, cst.Name) \
                and small.targets[0].target.value == small.value.func.value.value:
            call = small.value
        else:
            return False
        if not call.args:
            return False
        condition = call.args[0].value
        attributes = [a for a in find(condition, cst.Attribute) if is_self_attribute(a)]
        return self.causal(ctx, condition) or any(a.attr.value in buffers for a in attributes) \
            or any(self.causal(ctx, n) for n in find(condition, cst.Name))

    def causal(self, ctx: Context, value: cst.BaseExpression) -> bool:
        """A mask built by a causal builder: directly, or a name assigned one in the same function."""
        if any(builder in ctx.code(value) for builder in CAUSAL_BUILDERS):
            return True
        if not isinstance(value, cst.Name):
            return False
        scope = ctx.enclosing(value, cst.FunctionDef) or ctx.module
        for assign in find(scope, cst.Assign):
            targets = [t.target for t in assign.targets]
            if any(isinstance(t, cst.Name) and t.value == value.value for t in targets):
                if any(builder in ctx.code(assign.value) for builder in CAUSAL_BUILDERS):
                    return True
        return False

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for arg in ctx.all(cst.Arg):
            if arg.keyword is None or not isinstance(ctx.parents.get(arg), cst.Call):
                continue
            key = arg.keyword.value
            if key == "is_causal" and isinstance(arg.value, cst.Name) and arg.value.value == "True" \
                    or key in MASK_KEYWORDS and self.causal(ctx, arg.value):
                found.append(Site(f"causal-mask:{ctx.where(arg)}:{key}={ctx.code(arg.value)}", arg))
        buffers = self.causal_buffers(ctx)
        for line in ctx.all(cst.SimpleStatementLine):
            if ctx.enclosing(line, cst.FunctionDef) is not None and self.masked_fill(ctx, line, buffers):
                found.append(Site(f"causal-mask:{ctx.where(line)}:{ctx.code(line.body[0])}", line))
        return found

    def mutate(self, ctx: Context, site: Site):
        if isinstance(site.node, cst.SimpleStatementLine):
            return remove_statements(ctx, [site.node])
        call = ctx.parents[site.node]
        index = list(call.args).index(site.node)

        def drop(updated: cst.Call) -> cst.Call:
            args = list(updated.args)
            removed = args.pop(index)
            if args and index == len(args):  # the last argument went: its predecessor takes its comma (or none)
                args[-1] = args[-1].with_changes(comma=removed.comma)
            return updated.with_changes(args=args)

        return rewrite(ctx.module, {call: drop})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
def forward(self, x):
    mask = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), 1)
    h = self.attn(x, x, x, attn_mask=mask)[0]
    return self.head(h)
""",
            after="""\
def forward(self, x):
    mask = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), 1)
    h = self.attn(x, x, x)[0]
    return self.head(h)
"""), Example(
            before="""\
def forward(self, q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
""",
            after="""\
def forward(self, q, k, v):
    return F.scaled_dot_product_attention(q, k, v)
"""), Example(
            before="""\
class Attention(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, q, k, v):
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v
""",
            after="""\
class Attention(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, q, k, v):
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        return F.softmax(att, dim=-1) @ v
""")]


BUG = Bug(
    id="causal-mask",
    title="Attention without its causal mask",
    difficulty="hard",
    observe=("The language model trains beautifully: its training and validation losses end far lower than "
             "this model and data should allow (about half of what a correct run reaches). Yet text generated "
             "from it, one character at a time, is gibberish."),
    hints=(
        "A loss that is too good to be true usually is. What could the model be reading that it should not?",
        "At position t the model must predict token t + 1. Change the tokens after t in one sequence: do the "
        "logits at t change?",
        "Self-attention lets every position read every other one unless something forbids reading ahead.",
    ),
    why=("Self-attention mixes all positions of the sequence. A causal language model must only look back: a "
         "mask (`attn_mask` with -inf above the diagonal, or `is_causal=True`) hides the later positions. "
         "Without it, the output at t reads token t + 1 from the input, which is exactly its target: training "
         "turns into copying, the loss collapses, and at generation time, where there is no future to read, the "
         "model has learnt nothing."),
    fix=("Pass the causal mask to attention again: `attn_mask=nn.Transformer.generate_square_subsequent_mask(T)` "
         "(or a boolean `torch.triu(torch.ones(T, T, dtype=torch.bool), 1)`), or `is_causal=True` with "
         "`F.scaled_dot_product_attention`. A mask that hides only the next token is not enough: t + 2 still "
         "leaks through position t + 1."),
    probes=("causality",),
    follow_up=(
        "Why do a boolean mask and an additive -inf mask mean opposite things for True?",
        "How would you test causality of any sequence model without reading its code?",
        "Why does an encoder such as BERT not need this mask, and what does it train on instead?",
        "With a KV cache at generation time, is the mask still needed? Why not?",
    ),
    operator=DropCausalMask(),
)
