import numpy as np
import torch.utils.data as tud


def init(worker):
    info = tud.get_worker_info()
    info.dataset.generator = np.random.default_rng(info.seed)


train = tud.DataLoader(train_set, batch_size=16, worker_init_fn=init, num_workers=3)
extra = tud.DataLoader(extra_set, num_workers=3)
