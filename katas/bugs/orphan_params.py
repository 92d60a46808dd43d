"""orphan-params: a module container that registers its blocks becomes a plain Python list (or dict)."""
from __future__ import annotations

import re

import libcst as cst

from katas.bugs.detach import module_classes
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, is_self_attribute, method

LIST, DICT = "list", "dict"
CONTAINERS = {"torch.nn.ModuleList": LIST, "torch.nn.modules.container.ModuleList": LIST,
              "torch.nn.ModuleDict": DICT, "torch.nn.modules.container.ModuleDict": DICT}
PARAMETER = {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}
# torch.nn layers that hold parameters, and those that behave differently in training and evaluation
WITH_PARAMETERS = re.compile(r"^(Lazy)?(Linear|Bilinear|Conv(Transpose)?[123]d|Embedding(Bag)?|LayerNorm|GroupNorm|"
                             r"RMSNorm|(LSTM|GRU|RNN)(Cell)?|MultiheadAttention|PReLU)$")
MODE_DEPENDENT = re.compile(r"Dropout|BatchNorm|InstanceNorm|Transformer")
# what a plain list or dict does just as the module container did
SHARED_METHODS = {LIST: {"append", "extend", "insert", "index", "count", "pop"},
                  DICT: {"items", "values", "keys", "get", "update", "pop", "setdefault"}}
READERS = {"len", "enumerate", "zip", "reversed", "iter", "list", "tuple", "sorted"}


def container(ctx: Context, node: cst.CSTNode) -> str | None:
    """LIST for ``nn.ModuleList(...)``, DICT for ``nn.ModuleDict(...)``, else None."""
    if not isinstance(node, cst.Call):
        return None
    return next((CONTAINERS[q] for q in ctx.qualified_names(node.func) if q in CONTAINERS), None)


def plain(ctx: Context, call: cst.Call, kind: str) -> cst.BaseExpression | None:
    """What the container is built from, as a plain list or dict: ``[...]`` for ``nn.ModuleList([...])`` or a
    generator, ``{...}`` or ``dict(...)`` for ``nn.ModuleDict``; None for anything else (a name, a call)."""
    if not call.args:
        return cst.List([]) if kind == LIST else cst.Dict([])
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return None
    arg = call.args[0].value
    if kind == LIST:
        if isinstance(arg, cst.GeneratorExp):
            return cst.ListComp(elt=arg.elt, for_in=arg.for_in)
        return arg if isinstance(arg, (cst.List, cst.ListComp)) else None
    if isinstance(arg, (cst.Dict, cst.DictComp)) or isinstance(arg, cst.Call) and ctx.is_call_to(arg, "builtins.dict"):
        return arg
    return None


def members(ctx: Context, cls: cst.ClassDef, name: str, built: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The expressions that make the container's members: in what it is built from, and added in the class
    (``self.name.append(x)``, ``.extend([...])``, ``.insert(i, x)``, ``.update(...)``, ``self.name[k] = x``)."""
    found: list[cst.BaseExpression] = [built]
    for call in find(cls, cst.Call):
        if method(call) in ("append", "extend", "insert", "update") and is_self_attribute(call.func.value) \
                and call.func.value.attr.value == name:
            found += [a.value for a in call.args]
    for assign in find(cls, cst.Assign):
        for target in assign.targets:
            t = target.target
            if isinstance(t, cst.Subscript) and is_self_attribute(t.value) and t.value.attr.value == name:
                found.append(assign.value)
    return found


def traits(ctx: Context, nodes: list[cst.CSTNode], seen: frozenset = frozenset()) -> tuple[bool, bool]:
    """(builds parameters, builds a layer that acts differently in evaluation) under ``nodes``, following the
    file's own module classes into their bodies."""
    classes = {c.name.value: c for c, _ in module_classes(ctx)}
    params = mode = False
    for node in nodes:
        for call in find(node, cst.Call):
            for q in ctx.qualified_names(call.func):
                last = q.rsplit(".", 1)[-1]
                params |= q in PARAMETER or q.startswith("torch.nn.") and bool(WITH_PARAMETERS.match(last))
                mode |= q.startswith("torch.nn.") and bool(MODE_DEPENDENT.search(last)) \
                    or q.startswith("torch.nn.functional.") and "dropout" in last
            if isinstance(call.func, cst.Name) and call.func.value in classes and call.func.value not in seen:
                body = classes[call.func.value]
                inner = traits(ctx, [body], seen | {call.func.value})
                training = any(is_self_attribute(a) and a.attr.value == "training" for a in find(body, cst.Attribute))
                params, mode = params or inner[0], mode or inner[1] or training
    return params, mode


def uses_fit(ctx: Context, cls: cst.ClassDef, name: str, kind: str, target: cst.Attribute) -> bool:
    """Whether every use of the attribute ``name`` in the file works on a plain list or dict as well (iterated,
    indexed, counted, appended to ...), and the class uses it outside ``__init__`` (its forward)."""
    used = False
    for a in ctx.all(cst.Attribute):
        if a.attr.value != name or a is target:
            continue
        parent = ctx.parents.get(a)
        outer = ctx.parents.get(parent)
        fits = (isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is a
                or isinstance(parent, cst.Subscript) and parent.value is a
                or isinstance(parent, cst.Arg) and not parent.star and parent.keyword is None
                and isinstance(outer, cst.Call) and isinstance(outer.func, cst.Name) and outer.func.value in READERS
                or isinstance(parent, cst.Attribute) and parent.value is a and parent.attr.value in SHARED_METHODS[kind]
                and isinstance(outer, cst.Call) and outer.func is parent
                or kind == DICT and isinstance(parent, cst.ComparisonTarget)
                or kind == LIST and isinstance(parent, cst.AugAssign) and parent.target is a)
        if not fits:
            return False
        function = ctx.enclosing(a, cst.FunctionDef)
        used |= is_self_attribute(a) and ctx.enclosing(a, cst.ClassDef) is cls and function is not None \
            and function.name.value != "__init__"
    return used


def keeps_parameters(ctx: Context, init: cst.FunctionDef, site: cst.Assign) -> bool:
    """Whether ``__init__`` registers parameters besides the container (else an optimizer over the model's
    parameters() would get none, and fail at once)."""
    for assign in find(init, cst.Assign):
        targets = [t.target for t in assign.targets]
        targets += [e.value for t in targets if isinstance(t, cst.Tuple) for e in t.elements]
        if assign is not site and any(is_self_attribute(t) for t in targets) and traits(ctx, [assign.value])[0]:
            return True
    return False


def dedented(ctx: Context, call: cst.Call, statement: cst.CSTNode, replacement: cst.BaseExpression) -> cst.BaseExpression:
    """``replacement`` with its continuation lines moved left by what was removed before them: ``nn.ModuleList(``
    when they were aligned after it, the extra indentation when the arguments started on a line of their own."""
    indent = sum(len(b.indent if b.indent is not None else ctx.module.default_indent)
                 for b in ctx.ancestors(statement) if isinstance(b, cst.IndentedBlock))
    ws = call.whitespace_before_args
    if isinstance(ws, cst.ParenthesizedWhitespace):
        start = len(ws.last_line.value) + (indent if ws.indent else 0)
        shift = start - indent
    else:
        line = ctx.module.code_for_node(statement.with_changes(leading_lines=())).split("\n")[0]
        head = ctx.module.code_for_node(call).split("\n")[0]
        if head not in line:
            return replacement
        shift = len(ctx.module.code_for_node(call.func)) + len(ws.value) + (
            0 if call.args and isinstance(call.args[0].value, cst.GeneratorExp) else 1)
        start = indent + line.index(head) + shift
    if shift <= 0:
        return replacement

    class Dedent(cst.CSTTransformer):
        def leave_ParenthesizedWhitespace(self, original, updated):
            column = len(updated.last_line.value) + (indent if updated.indent else 0)
            if column < start:
                return updated
            return updated.with_changes(last_line=cst.SimpleWhitespace(updated.last_line.value[shift:]))

    return replacement.visit(Dedent())


class PlainContainer(Operator):
    """In a module's ``__init__``, build the blocks an ``nn.ModuleList`` (``nn.ModuleDict``) registered as a plain
    list (dict): ``self.blocks = nn.ModuleList([...])`` → ``self.blocks = [...]``. Only where every use of the
    attribute works on a plain list or dict, the forward uses it, its members have parameters and no layer that
    acts differently in evaluation, and the module keeps other parameters."""

    no_site = ("no model's __init__ assigns a ModuleList or ModuleDict of layers with parameters (built from a "
               "literal, a comprehension or appends, and used only by iterating or indexing it) beside other "
               "parameters of its own")

    def sites(self, ctx: Context) -> list[Site]:
        sites = []
        for cls, methods in module_classes(ctx):
            init = methods.get("__init__")
            for assign in find(init, cst.Assign) if init is not None else []:
                target = assign.targets[0].target if len(assign.targets) == 1 else None
                kind = container(ctx, assign.value)
                if kind is None or not is_self_attribute(target) or ctx.enclosing(assign, cst.FunctionDef) is not init:
                    continue
                built = plain(ctx, assign.value, kind)
                name = target.attr.value
                if built is None or not uses_fit(ctx, cls, name, kind, target):
                    continue
                params, mode = traits(ctx, members(ctx, cls, name, built))
                if params and not mode and keeps_parameters(ctx, init, assign):
                    code = f"self.{name} = {ctx.code(assign.value.func)}(...)"
                    sites.append(Site(f"orphan-params:{ctx.where(assign)}:{code}", assign.value))
        return sites

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        call = site.node
        replacement = dedented(ctx, call, ctx.statement(call), plain(ctx, call, container(ctx, call)))
        return rewrite(ctx.module, {call: lambda _: replacement})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch import nn


class Encoder(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = h + layer(h).relu()
        return h
""",
            after="""\
from torch import nn


class Encoder(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.layers = [nn.Linear(width, width) for _ in range(depth)]

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = h + layer(h).relu()
        return h
"""), Example(
            before="""\
import torch.nn as nn


class MultiTask(nn.Module):
    def __init__(self, tasks):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(32, 64), nn.GELU())
        self.heads = nn.ModuleDict({task: nn.Linear(64, n) for task, n in tasks.items()})

    def forward(self, x, task):
        return self.heads[task](self.trunk(x))
""",
            after="""\
import torch.nn as nn


class MultiTask(nn.Module):
    def __init__(self, tasks):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(32, 64), nn.GELU())
        self.heads = {task: nn.Linear(64, n) for task, n in tasks.items()}

    def forward(self, x, task):
        return self.heads[task](self.trunk(x))
""")]


BUG = Bug(
    id="orphan-params",
    title="Blocks kept in a plain list are never trained",
    difficulty="medium",
    observe=("Nothing crashes and accuracy ends high, though the loss settles a little above where this model "
             "should get it; yet the weights of some layers that clearly run in forward() are exactly the same after "
             "training as when the model was built. Run on a GPU, the first forward stops: tensors on two devices."),
    hints=(
        "Count the model's parameters with `sum(p.numel() for p in model.parameters())`, and count what forward() "
        "actually uses. Do they agree?",
        "Print `model.state_dict().keys()`. Is every layer that runs in forward() there?",
        "PyTorch only finds submodules stored as attributes or inside its own container types; look at how the "
        "blocks are stored in `__init__`.",
    ),
    why=("`nn.Module` registers a submodule when it is assigned as an attribute or held by an `nn.ModuleList` / "
         "`nn.ModuleDict` / `nn.Sequential`. Modules inside a plain Python list or dict are invisible to it: "
         "`model.parameters()` skips them, so the optimizer never holds their weights, and `state_dict()`, "
         "`.to(device)`, `.train()` / `.eval()` and `.half()` skip them too. They still run in forward() and get "
         "gradients, but stay at their random initialisation; on a GPU the forward fails, as they stay on the CPU."),
    fix=("Keep the blocks in `nn.ModuleList([...])` (`nn.ModuleDict({...})` for a dict) or `nn.Sequential(*blocks)`, "
         "or register each one with `self.add_module(name, block)`. Adding their parameters to the optimizer by "
         "hand trains them, but `state_dict()` and `.to(device)` still miss them."),
    probes=("params-trained",),
    follow_up=(
        "Which operations of `nn.Module` walk its registered children, and what does each miss for an "
        "unregistered block?",
        "How would you write a test that every parameter used in forward() is in `model.parameters()`?",
        "When would you deliberately keep a module out of `parameters()` (a frozen teacher, an EMA copy), and how "
        "do you do that safely?",
        "Why does this bug show up immediately on a GPU but silently on a CPU?",
    ),
    operator=PlainContainer(),
)
