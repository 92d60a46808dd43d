"""A correct PyTorch training script: deep Q-learning on a small grid written in this file.

A walker starts on a random cell of a SIZE x SIZE grid and moves up, down, left or
right; reaching the goal in the far corner pays 1 and ends the episode, and an
episode that runs out of steps is cut off (not ended: its last state still has a
future). The Q-network learns from a replay buffer of past moves, explores
epsilon-greedily, and regresses on TD targets r + gamma * max_a' Q_target(s', a')
computed without gradient by a target network synced every SYNC_EVERY updates;
a terminal move has no future value. The loss of a Q-learner need not fall: its
targets move as it learns. The greedy policy's return is what improves.
Run it with `python reference/rl.py [--device cuda]`.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE, MAX_STEPS = 6, 25
MOVES = torch.tensor([[-1, 0], [1, 0], [0, -1], [0, 1]])  # up, down, left, right
GAMMA, SYNC_EVERY, BATCH = 0.9, 50, 32


class Grid:
    """The environment: a state is the walker's cell as a one-hot vector of SIZE * SIZE."""

    goal = (SIZE - 1, SIZE - 1)

    def __init__(self, g: torch.Generator):
        self.g = g

    def reset(self, cell: tuple[int, int] | None = None) -> torch.Tensor:
        while cell is None or cell == self.goal:
            cell = tuple(torch.randint(SIZE, (2,), generator=self.g).tolist())
        self.cell, self.steps = cell, 0
        return self.observe()

    def observe(self) -> torch.Tensor:
        state = torch.zeros(SIZE * SIZE)
        state[self.cell[0] * SIZE + self.cell[1]] = 1.0
        return state

    def step(self, action: int) -> tuple[torch.Tensor, float, bool, bool]:
        """The next state, the reward, whether the episode ended (terminal) and whether it was cut off."""
        row, col = (min(max(c + m, 0), SIZE - 1) for c, m in zip(self.cell, MOVES[action].tolist()))
        self.cell, self.steps = (row, col), self.steps + 1
        terminal = self.cell == self.goal
        return self.observe(), float(terminal), terminal, self.steps == MAX_STEPS


class Replay:
    """The last `capacity` moves, as tensors, sampled uniformly."""

    def __init__(self, capacity: int, state_size: int):
        self.states = torch.zeros(capacity, state_size)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.next_states = torch.zeros(capacity, state_size)
        self.terminal = torch.zeros(capacity)
        self.size, self.next = 0, 0

    def add(self, state, action, reward, next_state, terminal) -> None:
        i = self.next
        self.states[i], self.actions[i], self.rewards[i] = state, action, reward
        self.next_states[i], self.terminal[i] = next_state, float(terminal)
        self.next, self.size = (i + 1) % len(self.states), min(self.size + 1, len(self.states))

    def sample(self, n: int, g: torch.Generator, device) -> tuple[torch.Tensor, ...]:
        i = torch.randint(self.size, (n,), generator=g)
        return tuple(t[i].to(device) for t in
                     (self.states, self.actions, self.rewards, self.next_states, self.terminal))


class QNet(nn.Module):
    def __init__(self, states: int = SIZE * SIZE, actions: int = len(MOVES), width: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(states, width), nn.ReLU(), nn.Linear(width, actions))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state)  # (B, actions): one value per move


def td_target(target_net, rewards, next_states, terminal):
    """r + gamma * max_a' Q_target(s', a'); a terminal move has no future."""
    with torch.no_grad():
        next_values = target_net(next_states).max(dim=1).values  # (B,)
    return rewards + GAMMA * (1.0 - terminal) * next_values


def update(q_net, target_net, optimizer, batch):
    states, actions, rewards, next_states, terminal = batch
    q = q_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)  # (B,): the value of the move taken
    loss = F.smooth_l1_loss(q, td_target(target_net, rewards, next_states, terminal))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_value_(q_net.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def act(q_net, state, epsilon, g, device) -> int:
    if torch.rand((), generator=g) < epsilon:
        return int(torch.randint(len(MOVES), (), generator=g))
    with torch.no_grad():
        return int(q_net(state.to(device)).argmax())


def greedy_return(q_net, device) -> float:
    """The discounted return of the greedy policy from every start cell, averaged: all walkers step together."""
    cells = torch.tensor([(r, c) for r in range(SIZE) for c in range(SIZE) if (r, c) != Grid.goal])  # (N, 2)
    goal, moves = torch.tensor(Grid.goal), MOVES
    walking, total = torch.ones(len(cells), dtype=torch.bool), torch.zeros(len(cells))
    for t in range(MAX_STEPS):
        states = F.one_hot(cells[:, 0] * SIZE + cells[:, 1], SIZE * SIZE).float()  # (N, SIZE * SIZE)
        with torch.no_grad():
            actions = q_net(states.to(device)).argmax(dim=1).cpu()
        cells = torch.where(walking.unsqueeze(1), (cells + moves[actions]).clamp(0, SIZE - 1), cells)
        arrived = walking & (cells == goal).all(dim=1)
        total += arrived.float() * GAMMA ** t
        walking &= ~arrived
    return total.mean().item()


def fit(q_net, device, epochs=4, steps=150):
    q_net.to(device)
    target_net = copy.deepcopy(q_net)
    optimizer = torch.optim.Adam(q_net.parameters())  # its default rate, 1e-3
    g = torch.Generator().manual_seed(1)
    env, replay = Grid(g), Replay(5000, SIZE * SIZE)
    state, updates = env.reset(), 0
    for epoch in range(epochs):
        losses = []
        for step in range(steps):
            epsilon = max(0.1, 1.0 - (epoch * steps + step) / (epochs * steps / 2))
            action = act(q_net, state, epsilon, g, device)
            next_state, reward, terminal, cut_off = env.step(action)
            replay.add(state, action, reward, next_state, terminal)
            state = env.reset() if terminal or cut_off else next_state
            if replay.size >= BATCH:
                losses.append(update(q_net, target_net, optimizer, replay.sample(BATCH, g, device)))
                updates += 1
                if updates % SYNC_EVERY == 0:
                    target_net.load_state_dict(q_net.state_dict())
        print(f"epoch {epoch}  loss {sum(losses) / len(losses):.4f}  return {greedy_return(q_net, device):.3f}")
    return q_net


def pick_device(requested: str | None) -> torch.device:
    return torch.device(requested or ("cuda" if torch.cuda.is_available() else "cpu"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    args = parser.parse_args()
    torch.manual_seed(0)
    fit(QNet(), pick_device(args.device))


if __name__ == "__main__":
    main()
