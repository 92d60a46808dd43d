import random

import torch
import torch.nn.functional as F


class Agent:
    def __init__(self, policy_net, target_net, memory, target_update=200, gamma=0.99):
        self.policy_net, self.target_net = policy_net, target_net
        self.memory = memory
        self.optimizer = torch.optim.RMSprop(policy_net.parameters(), lr=2.5e-4)
        self.target_update, self.gamma = target_update, gamma
        self.learn_steps = 0

    def learn(self, batch_size=64):
        s, a, r, s2, done = self.memory.sample(batch_size)
        q = self.policy_net(s).gather(1, a)
        with torch.no_grad():
            best = self.target_net(s2).max(1, keepdim=True)[0]
        loss = F.mse_loss(q, r + self.gamma * best * (1 - done))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.learn_steps += 1
        if self.learn_steps % self.target_update == 0:
            # refresh the frozen copy
            self.target_net.load_state_dict(self.policy_net.state_dict())


def run(agent, env, frames):
    state = env.reset()
    for frame in range(frames):
        action = random.randrange(env.actions)
        state, reward, done = env.step(action)
        agent.learn()
