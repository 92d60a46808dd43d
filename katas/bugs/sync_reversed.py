"""sync-reversed: the target network's sync copies the wrong way: the trained network is reset to the target.

Sites: a line ``target.load_state_dict(online.state_dict())`` (two different modules, names or attributes) run in a
training loop or in a function that steps an optimizer. The edit swaps the two modules: the online network is
loaded with the target's weights, which nothing else changes, so every sync throws away the updates since the last.
"""
from __future__ import annotations

import libcst as cst

from katas.bugs.target_sync import sync_of
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import in_training, steps_in


class ReverseTargetSync(Operator):
    """Swap the module loaded and the module read in a target network's ``load_state_dict`` sync."""

    no_site = "no target network is synced with target.load_state_dict(online.state_dict()) in a training loop"

    def sites(self, ctx: Context) -> list[Site]:
        loops = set(ctx.training_loops())
        found = []
        for line in ctx.all(cst.SimpleStatementLine):
            names = sync_of(ctx, line)
            if names is not None and (in_training(ctx, line, loops) or steps_in(ctx, line)):
                found.append(Site(f"sync-reversed:{ctx.where(line)}:{names[0]}", line))
        return found

    def mutate(self, ctx: Context, site: Site):
        def reversed_sync(line: cst.SimpleStatementLine) -> cst.CSTNode:
            call = line.body[0].value
            read = call.args[0].value
            target, online = call.func.value, read.func.value
            swapped = call.with_changes(
                func=call.func.with_changes(value=online),
                args=[call.args[0].with_changes(value=read.with_changes(func=read.func.with_changes(value=target)))])
            return line.with_changes(body=[line.body[0].with_changes(value=swapped)])

        return rewrite(ctx.module, {site.node: reversed_sync})

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
    if step % 100 == 0:
        policy.load_state_dict(target.state_dict())
"""), Example(
            before="""\
class DQN:
    def learn(self, batch):
        loss = self.td_loss(batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.sync_every == 0:
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
        if self.updates % self.sync_every == 0:
            self.q.load_state_dict(self.target_q.state_dict())
""")]


BUG = Bug(
    id="sync-reversed",
    title="Target sync copies the wrong way",
    difficulty="medium",
    observe=("The loss falls in every epoch, yet the greedy policy's return stays at 0.000 from the first epoch to "
             "the last, where the correct script's climbs past 0.5."),
    hints=(
        "Print one weight of each network just after each sync. Which of the two ever changes from one sync to the "
        "next?",
        "load_state_dict copies into the module it is called on. Which network should a sync change?",
        "The sync runs backwards: the online network is loaded with the target's weights, which nothing else ever "
        "changes, so every sync resets the network being trained to its initial weights and throws away the "
        "updates since the last one.",
    ),
    why=("`a.load_state_dict(b.state_dict())` copies b's tensors into a's. A target network is synced by loading "
         "the online network's weights into it; written the other way round, the target never changes (it keeps the "
         "weights it was copied with at the start), and the online network is put back to those weights at every "
         "sync. Between syncs it learns as usual, so the loss looks healthy, but nothing it learns outlives the next "
         "sync, and the greedy policy never gets better than an untrained one."),
    fix=("Load the online network's weights into the target: `target_net.load_state_dict(q_net.state_dict())`; or "
         "update the target in place with Polyak averaging (`t.lerp_(p, tau)` over the zipped parameters under "
         "no_grad)."),
    probes=("target-lag",),
    follow_up=(
        "How would you test, in one line, that a sync changed the network you meant it to change?",
        "What does load_state_dict do with tensors that share storage with the module's own?",
        "Why is the target network initialised as a copy of the online network rather than at random?",
    ),
    operator=ReverseTargetSync(),
)
