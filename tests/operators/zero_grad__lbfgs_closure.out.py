import torch

torch.manual_seed(0)
xs = torch.linspace(-2, 2, 128).unsqueeze(1)
ys = torch.sin(3 * xs)
curve = torch.nn.Sequential(torch.nn.Linear(1, 24), torch.nn.Tanh(), torch.nn.Linear(24, 1))
optimizer = torch.optim.LBFGS(curve.parameters(), lr=0.8, history_size=20)


def closure():
    # LBFGS calls this several times per step: each call must start from zero gradients
    loss = torch.nn.functional.mse_loss(curve(xs), ys)
    loss.backward()
    return loss


for step in range(12):
    loss = optimizer.step(closure)
    print(step, loss.item())
