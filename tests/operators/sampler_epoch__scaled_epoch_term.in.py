import random


class BucketBatchSampler:
    def __init__(self, buckets, batch_size, base_seed=1234):
        self.buckets, self.batch_size, self.base_seed, self.current_epoch = buckets, batch_size, base_seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.current_epoch = int(epoch)

    def __iter__(self):
        rng = random.Random()
        rng.seed(self.base_seed)
        batches = []
        for bucket in self.buckets:
            bucket = list(bucket)
            rng.shuffle(bucket)
            batches += [bucket[i:i + self.batch_size] for i in range(0, len(bucket), self.batch_size)]
        torch_rng = make_generator()
        torch_rng.manual_seed(1000 * self.current_epoch + self.base_seed)
        return iter([batches[i] for i in torch_rng_permutation(torch_rng, len(batches))])
