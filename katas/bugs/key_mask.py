"""key-mask: attention looks at padded positions (the key padding mask dropped)."""
from __future__ import annotations

import libcst as cst

from katas.bugs.pad_loss import without_argument
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite

KEYWORDS = {"src_key_padding_mask", "key_padding_mask"}


def mask_argument(call: cst.Call) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value in KEYWORDS
                 and not (isinstance(a.value, cst.Name) and a.value.value == "None")), None)


class DropKeyPaddingMask(Operator):
    """At a call given ``src_key_padding_mask=`` or ``key_padding_mask=`` (a transformer encoder or layer, a
    multi-head attention), remove that argument: every query then attends to the padded keys too."""

    no_site = "it passes no key padding mask to an attention layer"

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"key-mask:{ctx.where(call)}:{ctx.code(call)}", call)
                for call in ctx.all(cst.Call) if mask_argument(call) is not None]

    def mutate(self, ctx: Context, site: Site):
        index = list(site.node.args).index(mask_argument(site.node))
        return rewrite(ctx.module, {site.node: lambda call: without_argument(call, call.args[index])})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
class Encoder(nn.Module):
    def forward(self, x, pad_mask):
        y, _ = self.attn(x, x, x, key_padding_mask=pad_mask, need_weights=False)
        return self.norm(x + y)
""",
            after="""\
class Encoder(nn.Module):
    def forward(self, x, pad_mask):
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.norm(x + y)
""")]


BUG = Bug(
    id="key-mask",
    title="Attention attends to padding",
    difficulty="hard",
    observe=("Training and validation look reasonable, yet accuracy lags, and the same sequence gets a different "
             "prediction depending on which batch it is evaluated in."),
    hints=(
        "Evaluate one sequence alone, then the same sequence with extra padding appended. Should the answer change?",
        "Follow the padded positions through the model: which layer lets every position look at every other one?",
        "The attention layer is not told which keys are padding.",
    ),
    why=("Self-attention mixes every position with every other. Padded positions hold the padding embedding (plus "
         "position encodings); unless the keys at those positions are masked out, every real token's "
         "representation absorbs them, in a proportion that depends on how much padding its batch needed."),
    fix=("Pass the padding mask: `encoder(h, src_key_padding_mask=~keep)` (True where the key is padding), or "
         "`key_padding_mask=` for `nn.MultiheadAttention`. Mind the polarity: PyTorch masks where the mask is True."),
    probes=("pad-invariance",),
    follow_up=(
        "PyTorch's key padding mask is True where to ignore; what happens if you pass `keep` instead of `~keep`?",
        "How does a causal mask combine with a key padding mask, and what happens to a row where every key is masked?",
        "Why do padded positions' own outputs not matter, as long as they are never read?",
    ),
    operator=DropKeyPaddingMask(),
)
