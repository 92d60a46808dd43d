"""target-sync: the target network is synced at every update instead of every N.

Sites: an ``if`` without ``else`` whose condition takes a remainder (``updates % SYNC_EVERY == 0``) and whose body
is only ``target.load_state_dict(online.state_dict())`` (two different modules), run in a training loop. The edit
keeps the sync and drops its condition: the target network is a copy of the online one after every update.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import in_training, steps_in
from katas.engine.tree import find

HOLDER = m.Name() | m.Attribute()  # target, self.target_net, agent.q
SYNC = m.Call(func=m.Attribute(value=HOLDER, attr=m.Name("load_state_dict")),
              args=[m.Arg(value=m.Call(func=m.Attribute(value=HOLDER, attr=m.Name("state_dict")), args=[]),
                          keyword=None)])


def sync_of(ctx: Context, statement: cst.CSTNode) -> tuple[str, str] | None:
    """(target, online) of a line ``target.load_state_dict(online.state_dict())`` (names or attributes), two
    different modules."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr) and m.matches(statement.body[0].value, SYNC)):
        return None
    call = statement.body[0].value
    target, online = ctx.code(call.func.value), ctx.code(call.args[0].value.func.value)
    return (target, online) if target != online else None


def periodic(test: cst.BaseExpression) -> bool:
    """A condition that takes a remainder: ``step % N == 0``, ``(i + 1) % every == 0``."""
    return any(isinstance(op.operator, cst.Modulo) for op in find(test, cst.BinaryOperation))


class SyncTargetEveryUpdate(Operator):
    """Drop the periodic condition around a target network's ``load_state_dict`` sync."""

    no_site = "no target network is synced with target.load_state_dict(online.state_dict()) under a periodic if"

    def sites(self, ctx: Context) -> list[Site]:
        loops = set(ctx.training_loops())
        found = []
        for branch in ctx.all(cst.If):
            body = branch.body.body if isinstance(branch.body, cst.IndentedBlock) else ()
            if branch.orelse is not None or len(body) != 1 or not periodic(branch.test):
                continue
            names = sync_of(ctx, body[0])
            if names is not None and (in_training(ctx, branch, loops) or steps_in(ctx, branch)):
                found.append(Site(f"target-sync:{ctx.where(branch)}:{names[0]}", branch))
        return found

    def mutate(self, ctx: Context, site: Site):
        def unguarded(branch: cst.If) -> cst.CSTNode:
            line = branch.body.body[0]
            return line.with_changes(leading_lines=[*branch.leading_lines, *line.leading_lines])

        return rewrite(ctx.module, {site.node: unguarded})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
for step, batch in enumerate(replay_batches):
    loss = td_loss(policy, target, batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        target.load_state_dict(policy.state_dict())
""",
            after="""\
for step, batch in enumerate(replay_batches):
    loss = td_loss(policy, target, batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    target.load_state_dict(policy.state_dict())
"""), Example(
            before="""\
class DQN:
    def learn(self, batch):
        loss = self.td_loss(batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        if (self.updates + 1) % self.sync_every == 0:
            self.target_q.load_state_dict(self.q.state_dict())
""",
            after="""\
class DQN:
    def learn(self, batch):
        loss = self.td_loss(batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        self.target_q.load_state_dict(self.q.state_dict())
""")]


BUG = Bug(
    id="target-sync",
    title="Target network synced at every update",
    difficulty="medium",
    observe=("On this small grid nothing looks wrong: the loss falls and the greedy policy's return climbs, as the "
             "correct script's does. Printed just before each update, the largest difference between the two "
             "networks' weights is 0 every time."),
    hints=(
        "Compare the target network's weights with the online network's just before each update. How often "
        "do they differ?",
        "Why does DQN keep a second network at all? What would it mean for it to be identical to the first at "
        "every step?",
        "The sync has lost its condition: the target network is copied from the online network after every "
        "update, so the TD targets move with every step it takes.",
    ),
    why=("A Q-learner regresses Q(s, a) on r + gamma max Q_target(s', a'). When the target comes from the network "
         "being trained, every update also moves the targets it chases: the regression has no fixed point to "
         "settle on, errors feed back into the next targets, and learning oscillates or diverges (the 'deadly "
         "triad' of bootstrapping, off-policy data and function approximation). A target network synced every N "
         "updates holds the targets still for N steps; synced at every update it is the online network under "
         "another name."),
    fix=("Sync every N updates (`if updates % SYNC_EVERY == 0:`), or track the online weights slowly with Polyak "
         "averaging (`t.mul_(1 - tau).add_(p, alpha=tau)` under no_grad, tau around 0.005); either way the target "
         "lags behind the trained network."),
    probes=("target-lag",),
    follow_up=(
        "What is the difference between a hard sync every N steps and Polyak averaging, and how do you pick N "
        "or tau?",
        "Why must the TD target be computed without gradient, even from the target network?",
        "What does Double DQN change in the target, and which network picks the action?",
    ),
    operator=SyncTargetEveryUpdate(),
)
