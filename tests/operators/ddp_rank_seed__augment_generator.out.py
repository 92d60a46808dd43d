import torch
import torch.distributed as dist


class Augment:
    """Random crops and flips, from a generator of the augmenter's own."""

    def __init__(self, base_seed, size):
        self.rank = dist.get_rank()
        self.size = size
        self.generator = torch.Generator()
        self.generator.manual_seed(base_seed)

    def __call__(self, images):
        top, left = torch.randint(0, images.shape[-1] - self.size + 1, (2,), generator=self.generator).tolist()
        crops = images[..., top:top + self.size, left:left + self.size]
        flip = torch.rand(len(images), generator=self.generator) < 0.5
        return torch.where(flip[:, None, None, None], crops.flip(-1), crops)
