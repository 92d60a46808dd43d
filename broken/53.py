"""A PyTorch training script."""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = 6
MAX_STEPS = 25
MOVES = torch.tensor([[-1, 0], [1, 0], [0, -1], [0, 1]])
GAMMA = 0.9
SYNC_EVERY = 50
BATCH = 32


class Replay:
    def __init__(self, capacity: int, state_size: int):
        self.states = torch.zeros(capacity, state_size)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.next_states = torch.zeros(capacity, state_size)
        self.terminal = torch.zeros(capacity)
        self.size, self.next = 0, 0

    def add(self, state, action, reward, next_state, terminal) -> None:
        k = self.next
        self.states[k], self.actions[k], self.rewards[k] = state, action, reward
        self.next_states[k], self.terminal[k] = next_state, float(terminal)
        self.next, self.size = (k + 1) % len(self.states), min(self.size + 1, len(self.states))

    def sample(self, n: int, g: torch.Generator, device) -> tuple[torch.Tensor, ...]:
        idx = torch.randint(self.size, (n,), generator=g)
        return tuple(t[idx].to(device) for t in
                     (self.states, self.actions, self.rewards, self.next_states, self.terminal))


def td_target(target_net, rewards, next_states, terminal):
    with torch.no_grad():
        next_values = target_net(next_states).max(dim=1).values
    return rewards + GAMMA * (1.0 - terminal) * next_values


class QNet(nn.Module):
    def __init__(self, states: int = SIZE * SIZE, actions: int = len(MOVES), width: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(states, width), nn.ReLU(), nn.Linear(width, actions))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state)


def act(q_net, ckpt, epsilon, rng, target_device) -> int:
    if torch.rand((), generator=rng) < epsilon:
        return int(torch.randint(len(MOVES), (), generator=rng))
    with torch.no_grad():
        return int(q_net(ckpt.to(target_device)).argmax())


def resolve_device(asked: str | None) -> torch.device:
    return torch.device(asked or ("cuda" if torch.cuda.is_available() else "cpu"))


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    common = ap.parse_args()
    torch.manual_seed(0)
    train_model(QNet(), resolve_device(common.device))


def update(q_net, target_net, optim_, batch):
    states, actions, rewards, next_states, terminal = batch
    q = q_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
    batch_loss = F.smooth_l1_loss(q, td_target(target_net, rewards, next_states, terminal))
    optim_.zero_grad(set_to_none=True)
    batch_loss.backward()
    nn.utils.clip_grad_value_(q_net.parameters(), 1.0)
    optim_.step()
    return batch_loss.item()


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


def greedy_return(q_net, dev) -> float:
    cells = torch.tensor([(r, c) for r in range(SIZE) for c in range(SIZE) if (r, c) != Grid.goal])
    goal, moves = torch.tensor(Grid.goal), MOVES
    walking = torch.ones(len(cells), dtype=torch.bool)
    total = torch.zeros(len(cells))
    for t in range(MAX_STEPS):
        states = F.one_hot(cells[:, 0] * SIZE + cells[:, 1], SIZE * SIZE).float()
        with torch.no_grad():
            actions = q_net(states.to(dev)).argmax(dim=1).cpu()
        cells = torch.where(walking.unsqueeze(1), (cells + moves[actions]).clamp(0, SIZE - 1), cells)
        arrived = walking & (cells == goal).all(dim=1)
        total += arrived.float() * GAMMA ** t
        walking &= ~arrived
    return total.mean().item()


def train_model(q_net, device, max_epochs=4, steps=150):
    q_net.to(device)
    target_net = copy.deepcopy(q_net)
    updater = torch.optim.Adam(q_net.parameters())
    gen = torch.Generator().manual_seed(1)
    env, replay = Grid(gen), Replay(5000, SIZE * SIZE)
    saved = env.reset()
    updates = 0
    for ep in range(max_epochs):
        losses = []
        for step in range(steps):
            epsilon = max(0.1, 1.0 - (ep * steps + step) / (max_epochs * steps / 2))
            action = act(q_net, saved, epsilon, gen, device)
            next_state, reward, terminal, cut_off = env.step(action)
            replay.add(saved, action, reward, next_state, terminal)
            saved = env.reset() if terminal or cut_off else next_state
            if replay.size >= BATCH:
                losses.append(update(q_net, target_net, updater, replay.sample(BATCH, gen, device)))
                updates += 1
                if updates % SYNC_EVERY == 0:
                    q_net.load_state_dict(target_net.state_dict())
        print(f"epoch {ep}  loss {sum(losses) / len(losses):.4f}  return {greedy_return(q_net, device):.3f}")
    return q_net


if __name__ == "__main__":
    entry()
