"""grad-check: the judge on hand-made observations, and the check itself on small models (no training run)."""
from __future__ import annotations

import math

import pytest

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import grad_check
from checker.probes.grad_check import Observation


def observed(slope=14.0, differences=(8.83, 8.83), gaps=(1e-9, 1e-9), surgery=(), hidden=(), value=3.0) -> Observation:
    return Observation(model="Net", samples=4, tensors=14, value=value, slope=slope,
                       steps=[1e-6, 1e-8][:len(differences)], differences=list(differences), gaps=list(gaps),
                       surgery=list(surgery), hidden_edits=list(hidden))


def judge(obs: Observation):
    return grad_check.judge(obs, RunFacts())


def test_a_gradient_that_disagrees_with_settled_differences_fails_and_the_symptom_names_no_cause():
    finding = judge(observed(hidden=["mul_ through .data"]))
    assert finding.status == FAIL and finding.measured == "0.37"
    assert "mul_ through .data" in finding.message and "autograd's slope 14" in finding.message
    for word in (".data", "in-place", "no_grad", "not see", "mul_"):
        assert word not in finding.observed
    assert "differ by 0.37" in finding.observed


def test_a_disagreement_fails_without_a_hidden_edit_seen_too():
    assert judge(observed()).status == FAIL


def test_agreement_with_either_difference_passes():
    assert judge(observed(slope=8.83, differences=(8.83 * (1 + 1e-9),), gaps=(1e-9,))).status == PASS
    kink_crossed = observed(slope=8.83, differences=(9.5, 8.83 * (1 + 1e-8)), gaps=(0.1, 1e-7))
    assert judge(kink_crossed).status == PASS


def test_gradient_surgery_makes_a_disagreement_undecided_unless_a_hidden_edit_was_seen():
    finding = judge(observed(surgery=[".detach()"]))
    assert finding.status == CANNOT_TELL and "straight-through" in finding.message
    assert judge(observed(surgery=["autograd.Function Reverse"])).status == CANNOT_TELL
    assert judge(observed(surgery=[".data"], hidden=["mul_ through .data"])).status == FAIL


def test_differences_that_do_not_settle_cannot_tell():
    finding = judge(observed(differences=(8.83, 8.5)))
    assert finding.status == CANNOT_TELL and "do not settle" in finding.message
    assert judge(observed(differences=(8.83,), gaps=(1e-9,))).status == CANNOT_TELL


def test_one_sided_differences_that_disagree_cannot_tell():
    """A kink at the weights themselves (a pre-activation exactly 0), or a forward that keeps state."""
    finding = judge(observed(gaps=(0.7, 0.7)))
    assert finding.status == CANNOT_TELL and "kink at these very weights" in finding.message


def test_a_small_disagreement_cannot_tell():
    finding = judge(observed(slope=8.83 * (1 + 1e-4)))
    assert finding.status == CANNOT_TELL and "too little to be sure" in finding.message


def test_an_output_that_hardly_changes_cannot_tell():
    flat = observed(slope=1e-20, differences=(3e-20, 3e-20), value=1.0)
    finding = judge(flat)
    assert finding.status == CANNOT_TELL and "hardly changed" in finding.message


def test_no_training_forward_is_not_applicable_and_a_failed_check_cannot_tell():
    finding = judge(Observation())
    assert finding.status == NOT_APPLICABLE and "reached by a backward pass" in finding.message
    frozen = Observation(problem="the modules whose forwards a backward pass reached have no parameter that requires grad")
    assert judge(frozen).status == NOT_APPLICABLE and "no parameter" in judge(frozen).message
    failed = judge(Observation(model="Net", problem="the model could not be copied and converted to float64 (...)"))
    assert failed.status == CANNOT_TELL and "could not be copied" in failed.message


# -- the check, on small models ----------------------------------------------------------------------


def check(model, *args, **kwargs) -> Observation:
    from checker.session import Session

    return grad_check.check(Session("unused"), model, args, kwargs)


def status(obs: Observation) -> str:
    return grad_check.judge(obs, RunFacts()).status


def models():
    import torch
    from torch import nn

    class Residual(nn.Module):
        def __init__(self, inplace=None):
            super().__init__()
            self.inplace = inplace
            self.stem = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU())
            self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
            self.drop = nn.Dropout(0.5)
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            h = self.stem(x)
            h = h + self.block(h)
            if self.inplace == "data":
                h.data.mul_(math.sqrt(0.5))
            elif self.inplace == "detach":
                h.detach().div_(2.0)
            elif self.inplace == "no_grad":
                with torch.no_grad():
                    h.mul_(math.sqrt(0.5))
            else:
                h = h * math.sqrt(0.5)
            return self.head(self.drop(h))

    class StraightThrough(Residual):
        def forward(self, x):
            h = self.stem(x)
            return self.head(h + (torch.round(h * 4) / 4 - h).detach())

    class Noisy(Residual):
        """Noise in eval mode too, from the global generator: pinned by the check's seed."""

        def forward(self, x):
            return self.head(self.stem(x) + 0.1 * torch.randn(x.shape[0], 8))

    class Counting(Residual):
        """Keeps state: each call scales its output by how many calls came before."""

        calls = 0

        def forward(self, x):
            self.calls += 1
            return self.head(self.stem(x)) * self.calls

    class Tokens(nn.Module):
        def __init__(self, inplace=False):
            super().__init__()
            self.inplace = inplace
            self.embed = nn.Embedding(20, 8)
            self.mix = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, tokens, mask=None):
            x = self.embed(tokens)
            if self.inplace:
                x.data.mul_(math.sqrt(8))
            else:
                x = x * math.sqrt(8)
            x = torch.relu(self.mix(x)) * mask.unsqueeze(-1)
            return {"logits": self.head(x.sum(1)), "count": mask.sum()}

    return Residual, StraightThrough, Noisy, Counting, Tokens


@pytest.fixture(scope="module")
def batch():
    import torch

    return torch.randn(32, 6, generator=torch.Generator().manual_seed(1))


def test_a_correct_model_passes_and_an_edit_through_data_fails(batch):
    import torch

    Residual = models()[0]
    torch.manual_seed(0)
    correct = check(Residual(), batch)
    assert status(correct) == PASS and correct.samples == 4 and correct.tensors == 10
    assert len(correct.differences) == 1 and grad_check.relative(correct.slope, correct.differences[0]) < 1e-8
    for how, seen in (("data", "mul_ through .data"), ("detach", "div_ through .detach()"), ("no_grad", "mul_ under no_grad")):
        torch.manual_seed(0)
        obs = check(Residual(how), batch)
        assert status(obs) == FAIL, how
        assert obs.hidden_edits == [seen] and len(obs.differences) == 2


def test_a_straight_through_estimator_cannot_tell(batch):
    import torch

    torch.manual_seed(0)
    obs = check(models()[1](), batch)
    assert status(obs) == CANNOT_TELL and ".detach()" in obs.surgery and not obs.hidden_edits


def test_reseeded_noise_is_pinned_and_state_kept_across_calls_cannot_tell(batch):
    import torch

    _, _, Noisy, Counting, _ = models()
    torch.manual_seed(0)
    assert status(check(Noisy(), batch)) == PASS
    torch.manual_seed(0)
    counting = check(Counting(), batch)
    assert status(counting) == CANNOT_TELL and counting.gaps[-1] > 1


def test_token_inputs_keyword_arguments_and_dict_outputs():
    import torch

    Tokens = models()[4]
    tokens = torch.randint(0, 20, (16, 5), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(16, 5)
    torch.manual_seed(0)
    assert status(check(Tokens(), tokens, mask=mask)) == PASS
    torch.manual_seed(0)
    broken = check(Tokens(inplace=True), tokens, mask=mask)
    assert status(broken) == FAIL and broken.samples == 4


def test_the_check_leaves_the_model_and_the_random_streams_as_they_were(batch):
    import random

    import torch
    from torch.nn.modules import module as module_hooks

    Residual = models()[0]
    torch.manual_seed(0)
    model = Residual("data").train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    calls = []
    handle = module_hooks.register_module_forward_hook(lambda m, a, out: calls.append(m))
    own = model.head.register_forward_hook(lambda m, a, out: calls.append(m))
    random.seed(3)
    torch.manual_seed(3)
    state, python_state = torch.get_rng_state(), random.getstate()
    try:
        check(model, batch)
    finally:
        handle.remove()
        own.remove()
    assert torch.equal(torch.get_rng_state(), state) and random.getstate() == python_state
    assert model.training and all(m.training for m in model.modules())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert calls == []  # neither the script's global hooks nor the model's own ran for the copy
    assert all(p.grad is None for p in model.parameters())


def test_a_model_that_cannot_be_copied_cannot_tell(batch):
    import threading

    Residual = models()[0]
    model = Residual()
    model.lock = threading.Lock()  # shared, not copied: fine
    assert status(check(model, batch)) == PASS
    model.block[0].weight_cache = model.block[0].weight * 2  # a non-leaf tensor attribute: copied detached
    assert status(check(model, batch)) == PASS
    model.locks = [threading.Lock()]  # plain data, copied: a lock cannot be
    obs = check(model, batch)
    assert status(obs) == CANNOT_TELL and obs.problem


def test_a_copy_whose_backward_raises_cannot_tell(batch):
    import torch

    class NoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    class Net(models()[0]):
        def forward(self, x):
            return self.head(NoBackward.apply(self.stem(x)))

    obs = check(Net(), batch)
    assert status(obs) == CANNOT_TELL and obs.problem.startswith("the check failed on the copy (NotImplementedError")
