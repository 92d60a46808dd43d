from copy import copy, deepcopy

import torch


def update(q, q_targ, optimizer, batch):
    s, a, r, s2, done = batch
    with torch.no_grad():
        y = r + 0.99 * (1 - done) * q_targ(s2).max(1).values
    loss = ((q(s).gather(1, a).squeeze(1) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


q = QNetwork(obs_dim, n_actions)
q_targ = copy(q)
optimizer = torch.optim.Adam(q.parameters(), lr=1e-3)
for t in range(total_steps):
    update(q, q_targ, optimizer, replay.sample_batch(100))
