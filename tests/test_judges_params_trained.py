"""params-trained: the judge on hand-made observations, and the observer on small models trained in this process
(events fed by hand, as the session would feed them; no checked run)."""
from __future__ import annotations

import weakref
from dataclasses import asdict

import pytest

from checker.events import Event, Forward, Update
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import params_trained
from checker.probes.params_trained import Observation, judge

BLOCKS = ["Net.blocks.0.weight", "Net.blocks.0.bias", "Net.blocks.1.weight", "Net.blocks.1.bias", "Net.blocks.2.weight"]


def test_no_update_after_a_gradient_is_not_applicable():
    assert judge(Observation(), RunFacts(backwards=0)).status == NOT_APPLICABLE
    finding = judge(Observation(), RunFacts(backwards=12))
    assert finding.status == NOT_APPLICABLE and "no update followed a gradient" in finding.message


def test_unregistered_parameters_that_never_change_fail_and_the_symptom_names_no_cause():
    obs = Observation(graded=14, unregistered=BLOCKS, updates=64, models=["Net"])
    finding = judge(obs, RunFacts(backwards=64, updates=64))
    assert finding.status == FAIL and finding.measured == "5 of 14 tensors"
    assert "plain list" in finding.message and "parameters()" in finding.message
    assert finding.observed.startswith("5 parameter tensors that ran in Net's forward and received gradients stayed "
                                       "exactly as they were through 64 updates (Net.blocks.0.weight")
    assert finding.observed.endswith("and 1 more)")
    for word in ("list", "regist", "optimizer", "parameters()", "state_dict"):
        assert word not in finding.observed


def test_an_optimizer_that_holds_them_without_changing_them_is_said_so():
    finding = judge(Observation(graded=14, unregistered=BLOCKS[:2], held=2, updates=64, models=["Net"]), RunFacts())
    assert finding.status == FAIL and "an optimizer holds 2 of them" in finding.message


def test_a_part_replaced_after_the_optimizer_was_built_fails_and_names_the_holder():
    obs = Observation(graded=10, replaced=["Net.head.weight", "Net.head.bias"], updates=48, models=["Net"],
                      stale=[{"optimizer": "AdamW", "params": 2, "linked": True}])
    finding = judge(obs, RunFacts())
    assert finding.status == FAIL and "AdamW (2)" in finding.message and "replaced" in finding.message
    assert "optimizer" not in finding.observed and "replaced" not in finding.observed


def test_an_optimizer_holding_only_parameters_that_never_ran_cannot_tell():
    obs = Observation(graded=10, stale=[{"optimizer": "SGD", "params": 2, "linked": False}], undecided=10)
    finding = judge(obs, RunFacts())
    assert finding.status == CANNOT_TELL and "SGD (2)" in finding.message


def test_everything_trained_or_left_out_with_the_model_passes():
    assert judge(Observation(graded=14), RunFacts()).status == PASS
    finding = judge(Observation(graded=14, trained_unregistered=4), RunFacts())
    assert finding.status == PASS and "state_dict() leaves them out" in finding.message
    stale_but_nothing_unchanged = Observation(graded=6, stale=[{"optimizer": "SGD", "params": 2, "linked": False}])
    assert judge(stale_but_nothing_unchanged, RunFacts()).status == PASS


def test_the_observation_survives_the_record():
    obs = Observation(graded=3, unregistered=["a"], replaced=["b"], held=1, updates=2, models=["M"],
                      stale=[{"optimizer": "SGD", "params": 1, "linked": True}], undecided=0, trained_unregistered=1)
    assert Observation(**asdict(obs)) == obs


# -- the observer, on small models ---------------------------------------------------------------------------


class Session:
    """What the observer reads of a session: the top-level forward running now, the update count, optimizers."""

    def __init__(self):
        self.listeners: dict = {}
        self.forward: Forward | None = None
        self.forwards = 0
        self.updates = 0
        self.optimizers: list = []

    def on(self, event, owner, callback):
        self.listeners[event] = callback


class Run:
    """Feeds an observer the events of a training run: module calls, gradient contributions, updates."""

    def __init__(self):
        import torch

        self.session = Session()
        self.observer = params_trained.Observer(self.session)
        self.hooked: set[int] = set()
        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(self.pre)

    def pre(self, module, args) -> None:
        for p in module._parameters.values():
            if p is not None and p.requires_grad and id(p) not in self.hooked:
                self.hooked.add(id(p))
                p.register_hook(lambda g, p=p: self.session.listeners[Event.GRAD](p, g))
        self.session.listeners[Event.MODULE](module)

    def __call__(self, top, x):
        session = self.session
        session.forward = Forward(session.forwards, id(top), type(top).__name__, True, None, ref=weakref.ref(top))
        session.forwards += 1
        try:
            return top(x)
        finally:
            session.forward = None

    def step(self, optimizer) -> None:
        if not any(o is optimizer for o in self.session.optimizers):
            self.session.optimizers.append(optimizer)
        update = Update([p for g in optimizer.param_groups for p in g["params"]], optimizer)
        self.session.listeners[Event.UPDATE_PRE](update)
        optimizer.step()
        self.session.updates += 1
        self.session.listeners[Event.UPDATE_POST](update)

    def manual(self, params) -> None:
        import torch

        update = Update(list(params))
        self.session.listeners[Event.UPDATE_PRE](update)
        with torch.no_grad():
            for p in update.params:
                p -= 0.1 * p.grad
        self.session.updates += 1
        self.session.listeners[Event.UPDATE_POST](update)

    def finish(self) -> Observation:
        self.handle.remove()
        return self.observer.summary()


def net(kept: str = "list", width: int = 8):
    """A stem, three blocks kept in a ModuleList (``kept="module"``) or a plain list, and a head."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(4, width)
            blocks = [nn.Linear(width, width) for _ in range(3)]
            self.blocks = nn.ModuleList(blocks) if kept == "module" else blocks
            self.head = nn.Linear(width, 3)

        def forward(self, x):
            h = self.stem(x)
            for block in self.blocks:
                h = h + torch.tanh(block(h))
            return self.head(h)

    torch.manual_seed(0)
    return Net()


def train(model, optimizer=None, steps=4, run=None, update=None):
    import torch

    run = run or Run()
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
        model.zero_grad(set_to_none=True)
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(run(model, x), y).backward()
        if update is not None:
            update(run)
        else:
            run.step(optimizer)
    return run


def status(obs: Observation) -> str:
    return judge(obs, RunFacts(backwards=4, updates=4)).status


def test_blocks_in_a_plain_list_are_orphans_named_by_their_path():
    import torch

    model = net()
    obs = train(model, torch.optim.AdamW(model.parameters(), lr=1e-2)).finish()
    assert status(obs) == FAIL and obs.graded == 10 and obs.held == 0 and obs.models == ["Net"]
    assert obs.unregistered == ["Net.blocks.0.weight", "Net.blocks.0.bias", "Net.blocks.1.weight",
                                "Net.blocks.1.bias", "Net.blocks.2.weight", "Net.blocks.2.bias"]


def test_a_module_list_passes():
    import torch

    model = net("module")
    obs = train(model, torch.optim.AdamW(model.parameters(), lr=1e-2)).finish()
    assert status(obs) == PASS and obs.graded == 10 and not obs.unregistered


def test_an_extra_group_with_a_learning_rate_of_0_still_fails():
    import torch

    model = net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    optimizer.add_param_group({"params": [p for b in model.blocks for p in b.parameters()], "lr": 0.0})
    obs = train(model, optimizer).finish()
    assert status(obs) == FAIL and obs.held == 6


def test_blocks_handed_to_the_optimizer_by_hand_are_trained_and_pass():
    import torch

    model = net()
    params = list(model.parameters()) + [p for b in model.blocks for p in b.parameters()]
    obs = train(model, torch.optim.SGD(params, lr=0.1)).finish()
    assert status(obs) == PASS and obs.trained_unregistered == 6


def test_head_only_training_with_the_backbone_still_requiring_gradients_passes():
    import torch

    model = net("module")
    obs = train(model, torch.optim.SGD(model.head.parameters(), lr=0.1)).finish()
    assert status(obs) == PASS and not obs.stale and not obs.replaced


def test_a_head_replaced_after_the_optimizer_was_built_fails():
    import torch
    from torch import nn

    model = net("module")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.head = nn.Linear(8, 5)
    obs = train(model, optimizer).finish()
    assert status(obs) == FAIL
    assert obs.replaced == ["Net.head.bias", "Net.head.weight"]
    assert obs.stale == [{"optimizer": "AdamW", "params": 2, "linked": True}]


def test_a_head_replaced_before_the_optimizer_was_built_passes():
    import torch
    from torch import nn

    model = net("module")
    model.head = nn.Linear(8, 5)
    obs = train(model, torch.optim.AdamW(model.parameters(), lr=1e-2)).finish()
    assert status(obs) == PASS and not obs.stale


def test_an_optimizer_left_holding_only_a_replaced_head_cannot_tell():
    import torch
    from torch import nn

    model = net("module")
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
    model.head = nn.Linear(8, 5)
    obs = train(model, optimizer).finish()
    assert status(obs) == CANNOT_TELL and obs.undecided == 10


def test_a_part_that_runs_only_later_is_not_stale():
    """An optimizer over two models, the second called only from the third step: at the first step its parameters
    had never run, but by the end they had."""
    import torch
    from torch import nn

    model, later = net("module"), nn.Linear(3, 3)
    optimizer = torch.optim.SGD(list(model.head.parameters()) + list(later.parameters()), lr=0.1)
    run = Run()

    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.model = model

        def forward(self, x):
            self.calls += 1
            out = self.model(x)
            return out + later(out) if self.calls > 2 else out

    obs = train(Both(), optimizer, run=run).finish()
    assert status(obs) == PASS and not obs.stale


def test_frozen_hidden_teacher_passes_and_a_teacher_left_requiring_gradients_is_flagged():
    """A network kept out of a model's parameters() on purpose: frozen, it gets no gradient. Left requiring
    gradients and never called on its own, it looks exactly like the bug (the documented limit)."""
    import torch
    from torch import nn

    def student(frozen: bool):
        torch.manual_seed(0)
        teacher = nn.Linear(4, 3).requires_grad_(not frozen)

        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.hidden = [teacher]
                self.body = nn.Linear(4, 3)

            def forward(self, x):
                return self.body(x) + self.hidden[0](x)

        return Student()

    model = student(frozen=True)
    assert status(train(model, torch.optim.SGD(model.parameters(), lr=0.1)).finish()) == PASS
    model = student(frozen=False)
    obs = train(model, torch.optim.SGD(model.parameters(), lr=0.1)).finish()
    assert status(obs) == FAIL and obs.unregistered == ["Student.hidden.0.weight", "Student.hidden.0.bias"]


def test_a_network_also_called_on_its_own_is_registered_there():
    """A part called inside another model's forward, unregistered there, but also run as a model of its own."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    encoder = nn.Linear(4, 4)
    g = torch.Generator().manual_seed(2)

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(encoder(x))

    head = Head()
    run = Run()
    with torch.no_grad():
        run(encoder, torch.randn(2, 4, generator=g))
    obs = train(head, torch.optim.SGD(head.parameters(), lr=0.1), run=run).finish()
    assert status(obs) == PASS


@pytest.mark.parametrize("registered", [True, False])
def test_manual_sgd_over_the_model_parameters(registered):
    """Updates by hand train what parameters() yields: registered blocks pass, blocks in a plain list fail."""
    model = net("module" if registered else "list")
    obs = train(model, update=lambda run: run.manual(model.parameters())).finish()
    assert status(obs) == (PASS if registered else FAIL)


def test_no_update_is_not_applicable_and_zero_gradients_are_not_graded():
    import torch

    model = net()
    run = Run()
    torch.nn.functional.cross_entropy(run(model, torch.randn(4, 4)), torch.zeros(4, dtype=torch.long)).backward()
    assert status(run.finish()) == NOT_APPLICABLE
    model = net()
    run = Run()
    (run(model, torch.randn(4, 4)) * 0).sum().backward()
    run.step(torch.optim.SGD(model.parameters(), lr=0.1))
    obs = run.finish()
    assert obs.graded == 0 and status(obs) == NOT_APPLICABLE
