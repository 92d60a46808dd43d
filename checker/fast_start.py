"""Keep `torch._dynamo` from loading until a script really compiles something.

Every `torch.optim` step runs `import torch._dynamo; torch._dynamo.graph_break()`,
which costs more than importing torch itself, although in eager mode both calls
do nothing. Before torch is imported, the checked process puts a stand-in module
under that name. It answers the eager-mode calls the way the real module does
outside compilation: `graph_break` and `disable` (optimizers), and the two that
`torch.distributed` makes of a process that never compiled (`init_process_group`
clears dynamo's trace-rule caches, which do not exist yet; `DistributedDataParallel`
asks for the DDP optimisation mode, the default until dynamo's config is touched).
On any other use it loads the real module and steps aside, so `torch.compile` (and
a script that sets dynamo's config) works as usual.
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable

NAME = "torch._dynamo"


def _real() -> types.ModuleType | None:
    module = sys.modules.get(NAME)
    return None if isinstance(module, _StandIn) else module


class _DeferredDisable:
    """What `torch._dynamo.disable(fn)` returns: `fn` itself until dynamo is really loaded."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.disabled: Callable | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        real = _real()
        if real is None:
            return self.fn(*args, **kwargs)
        if self.disabled is None:
            self.disabled = real.disable(self.fn, *self.args, **self.kwargs)
        return self.disabled(*args, **kwargs)


class _Part:
    """A submodule of the stand-in: ``answers`` until dynamo is loaded, the real submodule's attributes otherwise."""

    def __init__(self, name: str, answers: dict[str, Callable]):
        self._name, self._answers = name, answers

    def __getattr__(self, attr: str) -> Any:
        if _real() is None and attr in self._answers:
            return self._answers[attr]
        return getattr(importlib.import_module(f"{NAME}.{self._name}"), attr)


class _StandIn(types.ModuleType):
    # `optimize_ddp = True` in dynamo's config; `_use_python_reducer` is False in eager DDP
    utils = _Part("utils", {"get_optimize_ddp_mode": lambda: "ddp_optimizer"})
    trace_rules = _Part("trace_rules", {"clear_lru_cache": lambda: None})  # nothing cached before dynamo loads

    def graph_break(self, *args: Any, **kwargs: Any) -> None:
        real = _real()
        if real is not None:
            real.graph_break(*args, **kwargs)

    def disable(self, fn: Callable | None = None, *args: Any, **kwargs: Any) -> Any:
        if fn is None:
            return self._load().disable(fn, *args, **kwargs)
        return _DeferredDisable(fn, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name != "__path__":  # introspection, e.g. inspect.getmodule
            raise AttributeError(name)
        return getattr(self._load(), name)

    def _load(self) -> types.ModuleType:
        if sys.modules.get(NAME) is self:
            del sys.modules[NAME]
        return importlib.import_module(NAME)


def load() -> None:
    """Load the real module now (a warm server pays for it once, for every check it forks)."""
    module = sys.modules.get(NAME)
    if isinstance(module, _StandIn):
        module._load()
    elif module is None:
        importlib.import_module(NAME)


def install() -> None:
    """Put the stand-in in place; call before the first `import torch`."""
    if NAME not in sys.modules:
        sys.modules[NAME] = _StandIn(NAME)
