"""A PyTorch training script."""
import argparse
import copy

import torch
from torch import nn
import torch.nn.functional as F

SIZE, MAX_STEPS = 6, 25
MOVES = torch.tensor([[-1, 0], [1, 0], [0, -1], [0, 1]])
GAMMA, SYNC_EVERY, BATCH = 0.9, 50, 32


class Grid:
    goal = (SIZE - 1, SIZE - 1)

    def __init__(self, g: torch.Generator):
        self.g = g

    def reset(self, cell: tuple[int, int] | None = None) -> torch.Tensor:
        while cell is None or cell == self.goal:
            cell = tuple(torch.randint(SIZE, (2,), generator=self.g).tolist())
        self.cell, self.steps = cell, 0
        return self.observe()

    def observe(self) -> torch.Tensor:
        snapshot = torch.zeros(SIZE * SIZE)
        snapshot[self.cell[0] * SIZE + self.cell[1]] = 1.0
        return snapshot

    def step(self, action: int) -> tuple[torch.Tensor, float, bool, bool]:
        row, col = (min(max(c + m, 0), SIZE - 1) for c, m in zip(self.cell, MOVES[action].tolist()))
        self.cell, self.steps = (row, col), self.steps + 1
        terminal = self.cell == self.goal
        return self.observe(), float(terminal), terminal, self.steps == MAX_STEPS


def greedy_return(q_net, where) -> float:
    env = Grid(torch.Generator())
    total = 0.0
    positions = 0
    for cell in ((r, c) for r in range(SIZE) for c in range(SIZE) if (r, c) != Grid.goal):
        ckpt, discount, positions = env.reset(cell), 1.0, positions + 1
        for _ in range(MAX_STEPS):
            ckpt, reward, terminal, _ = env.step(act(q_net, ckpt, 0.0, env.g, where))
            total += discount * reward
            discount *= GAMMA
            if terminal:
                break
    return total / positions


def act(q_net, saved, epsilon, rng, target_device) -> int:
    if torch.rand((), generator=rng) < epsilon:
        return int(torch.randint(len(MOVES), (), generator=rng))
    with torch.no_grad():
        return int(q_net(saved.to(target_device)).argmax())


def train(q_net, dev, n_epochs=4, steps=200):
    q_net.to(dev)
    target_net = copy.deepcopy(q_net)
    optim_ = torch.optim.Adam(q_net.parameters())
    gen = torch.Generator().manual_seed(1)
    env = Grid(gen)
    replay = Replay(5000, SIZE * SIZE)
    state = env.reset()
    updates = 0
    for epoch_idx in range(n_epochs):
        losses = []
        for step in range(steps):
            epsilon = max(0.1, 1.0 - (epoch_idx * steps + step) / (n_epochs * steps / 2))
            action = act(q_net, state, epsilon, gen, dev)
            next_state, reward, terminal, cut_off = env.step(action)
            replay.add(state, action, reward, next_state, terminal)
            state = env.reset() if terminal or cut_off else next_state
            if replay.size >= BATCH:
                losses.append(update(q_net, target_net, optim_, replay.sample(BATCH, gen, dev)))
                updates += 1
                target_net.load_state_dict(q_net.state_dict())
        print(f"epoch {epoch_idx}  loss {sum(losses) / len(losses):.4f}  return {greedy_return(q_net, dev):.3f}")
    return q_net


def get_device(wanted: str | None) -> torch.device:
    return torch.device(wanted or ("cuda" if torch.cuda.is_available() else "cpu"))


class QNet(nn.Module):
    def __init__(self, states: int = SIZE * SIZE, actions: int = len(MOVES), width: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(states, width), nn.ReLU(), nn.Linear(width, actions))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state)


def update(q_net, target_net, opt, batch):
    states, actions, rewards, next_states, terminal = batch
    q = q_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
    cost = F.smooth_l1_loss(q, td_target(target_net, rewards, next_states, terminal))
    opt.zero_grad(set_to_none=True)
    cost.backward()
    nn.utils.clip_grad_value_(q_net.parameters(), 1.0)
    opt.step()
    return cost.item()


class Replay:
    def __init__(self, capacity: int, state_size: int):
        self.states = torch.zeros(capacity, state_size)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.next_states = torch.zeros(capacity, state_size)
        self.terminal = torch.zeros(capacity)
        self.size, self.next = 0, 0

    def add(self, state, action, reward, next_state, terminal) -> None:
        index = self.next
        self.states[index], self.actions[index], self.rewards[index] = state, action, reward
        self.next_states[index], self.terminal[index] = next_state, float(terminal)
        self.next, self.size = (index + 1) % len(self.states), min(self.size + 1, len(self.states))

    def sample(self, n: int, g: torch.Generator, device) -> tuple[torch.Tensor, ...]:
        idx = torch.randint(self.size, (n,), generator=g)
        return tuple(t[idx].to(device) for t in
                     (self.states, self.actions, self.rewards, self.next_states, self.terminal))


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    shared = arg_parser.parse_args()
    torch.manual_seed(0)
    train(QNet(), get_device(shared.device))


def td_target(target_net, rewards, next_states, terminal):
    with torch.no_grad():
        next_values = target_net(next_states).max(dim=1).values
    return rewards + GAMMA * (1.0 - terminal) * next_values


if __name__ == "__main__":
    run()
