"""Token-id inputs of a model and their padding id, found from behaviour (shared by the padding probes).

Not a probe. A model's forward takes token ids when one of its tensor arguments is an
integer tensor of shape (batch, time) and the model holds an ``nn.Embedding``. Its
padding id is read, in this order, from:

* ``padding_idx`` of the model's embeddings (when they agree on one value);
* a boolean argument of the tokens' shape that splits them by one value: every position
  it marks one way holds that value and none marked the other way does (a key padding
  mask ``tokens == PAD``, or its complement ``tokens != PAD``);
* a one-dimensional integer argument of one length per sample, the longest as long as
  the batch: every position past a sample's length holds the same value.

When none of these holds, the padding id is unknown and the probes that need it say so.
Everything here runs in the checked process; torch is imported inside the functions.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

GIVE_UP = 16  # training forwards without token ids after which, none having had any, watching stops
KEPT = 4  # recent training forwards whose arguments are kept until the check
ATTEMPTS = 8  # updates at which a check is tried before the probe gives up waiting


@dataclass
class TokenForward:
    """A training forward whose arguments hold token ids."""

    module: Any
    args: tuple
    kwargs: dict
    tokens: Any  # the (batch, time) integer tensor
    pad: int | None  # the padding id, None when unknown
    source: str  # how the padding id was found, or why it was not


def integer(t) -> bool:
    import torch

    return not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


def token_input(args: tuple, kwargs: dict):
    """The (batch, time) integer tensor among a call's arguments, or None (asked of a model that embeds tokens)."""
    from checker.tensors import tensors_in

    return next((t for t in tensors_in((args, kwargs)) if integer(t) and t.dim() == 2 and t.shape[1] >= 2), None)


def padding_id(module, args: tuple, kwargs: dict, tokens) -> tuple[int | None, str]:
    """(the padding id, how it was found) or (None, why not)."""
    import torch

    from checker.tensors import tensors_in

    ids = {m.padding_idx for m in module.modules() if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None}
    if len(ids) == 1:
        pad = ids.pop()
        return (pad if pad >= 0 else None), "the embedding's padding_idx"
    for t in tensors_in((args, kwargs)):
        if t.dtype == torch.bool and t.shape == tokens.shape:
            for marked in (t, ~t):
                values = tokens[marked]
                if values.numel() and bool((values == values[0]).all()):
                    pad = int(values[0])
                    if not bool((tokens[~marked] == pad).any()):
                        return pad, "the mask passed with the tokens"
        if integer(t) and t.dim() == 1 and t.shape[0] == tokens.shape[0] and t is not tokens:
            lengths = t.to(tokens.device)
            if int(lengths.max()) == tokens.shape[1] and int(lengths.min()) >= 1:
                beyond = torch.arange(tokens.shape[1], device=tokens.device)[None, :] >= lengths[:, None]
                values = tokens[beyond]
                if values.numel() and bool((values == values[0]).all()):
                    return int(values[0]), "the lengths passed with the tokens"
    return None, "no padding id: no embedding has a padding_idx, and no mask or lengths passed with the tokens mark one"


TRAILING = "the value that only ever ends the rows, in runs of different lengths (right padding)"


def trailing_pad(tokens) -> int | None:
    """The padding id of right-padded token rows nothing else marks: the value most rows end with, when each of its
    occurrences lies in a run that reaches its row's end, some row ends with two or more of it, none is all of it,
    and the runs differ in length (rows padded to the longest of their batch). Fixed-length rows ending in one EOS
    each are not padded; a real token also occurs inside rows. Batch-first rows, or time-major columns."""
    import torch

    from checker.tensors import plain

    if not plain(tokens) or tokens.dim() != 2 or tokens.shape[0] < 2 or tokens.shape[1] < 2:
        return None
    for rows in (tokens, tokens.t()):
        last = rows[:, -1]
        value = int(last.mode().values)
        ends = rows == value
        run = ends.flip(1).to(torch.int32).cumprod(1).sum(1)  # how many of it end each row
        if 2 * int((last == value).sum()) >= len(last) and bool((run == ends.sum(1)).all()) \
                and 2 <= int(run.max()) < rows.shape[1] and int(run.min()) != int(run.max()):  # each row holds a token
            return value
    return None


class TokenForwards:
    """Keeps the arguments of the latest training forwards that take token ids, until ``stop()``."""

    def __init__(self, session, owner: str):
        self.session = session
        self._pending = None
        self.kept: dict[int, tuple[Any, TokenForward]] = {}  # forward index -> (Forward, TokenForward)
        self.seen_tokens = False
        self._embeds: dict[int, bool] = {}  # a module's serial (``Forward.module``) -> it holds an nn.Embedding
        self._handle = session.patches.forward_hook(owner, self._after, with_kwargs=True)
        self.latest: TokenForward | None = None
        self.misses = 0
        self.stopped = False

    def on_forward(self, forward) -> None:
        self._pending = forward if forward.grad else None

    def _after(self, module, args, kwargs, output) -> None:
        import torch

        if torch.compiler.is_compiling():  # inside code torch.compile traces: call through, touching nothing
            return
        pending = self._pending
        if pending is None or pending.ref() is not module:
            return
        self._pending = None
        embeds = self._embeds.get(pending.module)
        if embeds is None:
            embeds = self._embeds[pending.module] = any(isinstance(m, torch.nn.Embedding) for m in module.modules())
        tokens = token_input(args, kwargs) if embeds else None
        if tokens is None:
            self.misses += 1
            if self.misses >= GIVE_UP and not self.seen_tokens:
                self.stop()
            return
        self.seen_tokens = True
        pad, source = padding_id(module, args, kwargs, tokens)
        found = TokenForward(module, args, kwargs, tokens, pad, source)
        self.latest = found
        self.kept[pending.index] = (pending, found)
        while len(self.kept) > KEPT:
            self.kept.pop(next(iter(self.kept)))

    def reached(self) -> list[TokenForward]:
        """Kept forwards a backward pass reached, latest first."""
        return [found for forward, found in reversed(self.kept.values()) if forward.reached]

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._pending = None
        self.kept.clear()
        self.latest = None
        self.session.patches.remove(self._handle)


# -- running a copy ---------------------------------------------------------------


def float_copy(module):
    """A float32 copy in eval mode, without the model's own hooks (grad-check's copy, in float32)."""
    import torch

    from checker.probes._shared.replay import copy_of

    return copy_of(module, torch.float32)


@contextlib.contextmanager
def isolated(session, module):
    """Nothing the copy does reaches the script: RNG forked, hooks and events muted, autocast off, grad on (the
    training path of every layer, not an inference fast path), and on CUDA full float32 precision (TF32 off, so
    that two shapes of one input differ by rounding only), the script's settings restored after."""
    import torch

    from checker.probes._shared.replay import forked_rng, quiet

    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    with quiet(session), forked_rng(device), torch.inference_mode(False), torch.enable_grad(), \
            torch.autocast("cpu", enabled=False), \
            (torch.autocast("cuda", enabled=False) if device.type == "cuda" else contextlib.nullcontext()), \
            (full_float32() if device.type == "cuda" else contextlib.nullcontext()):
        yield


@contextlib.contextmanager
def full_float32():
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def unwrap(module):
    if type(module).__name__ in ("DataParallel", "DistributedDataParallel"):
        return module.module
    return module


def batch_dependent(module) -> str:
    """A layer whose eval output legitimately depends on the other samples of the batch, or ""."""
    import torch

    for name, m in module.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and not m.track_running_stats:
            return f"{name or type(m).__name__} normalises with batch statistics even in eval mode"
    return ""


def convert(value, tensor_fn):
    """``value`` with every tensor replaced by ``tensor_fn(t)`` (tuples, lists and dicts followed)."""
    import torch

    if isinstance(value, torch.Tensor):
        return tensor_fn(value)
    if type(value) in (tuple, list):
        return type(value)(convert(v, tensor_fn) for v in value)
    if type(value) is dict:
        return {k: convert(v, tensor_fn) for k, v in value.items()}
    return value


def float_outputs(output) -> list:
    from checker.tensors import tensors_in

    return [t.detach().float() for t in tensors_in(output) if t.is_floating_point()]
