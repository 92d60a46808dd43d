import numpy as np
import torch.utils.data as data


class ArrayDataset(data.Dataset):
    def __init__(self, images, targets, transform=None):
        self.images, self.targets, self.transform = images, targets, transform

    def __len__(self):
        return len(self.targets)


class Augmented(ArrayDataset):
    def __getitem__(self, index):
        img, target = self.images[index], int(self.targets[(index + 1) % len(self.targets)])
        img = np.asarray(img, dtype=np.float32) / 255.0
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def batches(images, targets):
    loader = data.DataLoader(Augmented(images, targets), batch_size=32, shuffle=True)
    return [(x.float(), y) for x, y in loader]
