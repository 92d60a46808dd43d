import torch
import torch.nn.functional as F


class Agent:
    def __init__(self, q, q_target, optimizer, gamma=0.99):
        self.q, self.q_target, self.optimizer, self.gamma = q, q_target, optimizer, gamma

    @torch.no_grad()
    def bootstrap(self, rewards, next_obs, dones):
        return rewards + self.gamma * self.q_target(next_obs).max(1).values * (1 - dones)

    @torch.no_grad()
    def act(self, obs):
        return self.q(obs).argmax(1)

    def learn(self, obs, actions, rewards, next_obs, dones):
        predicted = self.q(obs).gather(1, actions).squeeze(1)
        loss = F.mse_loss(predicted, self.bootstrap(rewards, next_obs, dones))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
