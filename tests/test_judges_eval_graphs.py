"""eval-no-grad judging, from hand-made observations: no run."""
from __future__ import annotations

from dataclasses import asdict

from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS
from checker.probes.eval_graphs import Observation, judge

FACTS = RunFacts(backwards=48, updates=48)


def test_no_evaluation_is_not_applicable():
    finding = judge(Observation(), FACTS)
    assert finding.status == NOT_APPLICABLE and finding.message == "no evaluation was observed"


def test_validation_forwards_that_built_graphs_advise_with_the_count():
    """Graphs nobody backpropagates cost time and memory but change no result: advice, never a failure."""
    obs = Observation(evaluations=16, validation=16, built=16, built_per_pass=[4, 4, 4, 4])
    finding = judge(obs, FACTS)
    assert finding.status == ADVICE and finding.measured == "16 of 16 forwards" and finding.threshold == "0"
    assert "no_grad" in finding.message
    assert "no_grad" not in finding.symptom and "inference_mode" not in finding.symptom
    assert finding.series == {"forwards that built a graph, per validation pass": [4, 4, 4, 4]}


def test_one_graph_building_validation_forward_is_enough_to_advise():
    obs = Observation(evaluations=16, validation=16, built=1, built_per_pass=[1, 0, 0, 0])
    assert judge(obs, FACTS).status == ADVICE


def test_graphs_built_outside_recognisable_validation_advise_too():
    """A teacher, a target network, a final test, validation on sliced tensors: the same waste, wherever it runs."""
    beside = judge(Observation(evaluations=64, validation=16, built=0, other_built=48, built_per_pass=[0] * 4), FACTS)
    assert beside.status == ADVICE and "teacher" in beside.message and beside.measured == "48 of 64 forwards"
    alone = judge(Observation(evaluations=48, validation=0, built=0, other_built=48), FACTS)
    assert alone.status == ADVICE and alone.measured == "48 of 48 forwards"


def test_evaluation_that_built_no_graph_passes():
    finding = judge(Observation(evaluations=6, validation=0), FACTS)
    assert finding.status == PASS and finding.measured == "0 of 6 forwards"


def test_the_observation_survives_the_record():
    obs = Observation(evaluations=3, validation=2, built=1, other_built=1, built_per_pass=[1])
    assert Observation(**asdict(obs)) == obs


class Timeline:
    """Just enough of a session for the validation test: each pass index has a loader role."""

    def __init__(self, roles):
        self.roles = roles

    def role(self, pass_index):
        return self.roles[pass_index]


def forward(index, module=1, pass_index=None, modes=()):
    from checker.events import Forward

    return Forward(index, module, "Net", True, pass_index, modes=set(modes))


def test_which_evaluation_forwards_are_recognisably_validation():
    from checker.probes.eval_graphs import validation

    session = Timeline({0: "train", 1: "eval"})
    assert validation(session, forward(5, pass_index=1), {})  # a batch of a loader that never trained
    assert not validation(session, forward(5, pass_index=0), {1: 9})  # a training loader's batch: not validation
    # sliced batches: evaluation behaviour, and the same model trains afterwards
    assert validation(session, forward(5, modes={"inactive"}), {1: 9})
    assert not validation(session, forward(5, modes={"inactive"}), {1: 3})  # after the last training: a final test
    assert not validation(session, forward(5, modes={"inactive"}), {2: 9})  # a teacher: never trains afterwards
    assert not validation(session, forward(5), {1: 9})  # no dropout or batch-norm: a rollout, a skipped loss?
    assert not validation(session, forward(5, modes={"active"}), {1: 9})  # training behaviour
