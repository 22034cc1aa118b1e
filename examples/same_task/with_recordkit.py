from functools import partial

import numpy as np
from make_samples import samples

import recordkit as rk
from recordkit.data import Dataset
from recordkit.integrations.torch import dataloader

if __name__ == "__main__":  # DataLoader workers may start by importing this file (spawn)
    with rk.ShardWriter("out/train-{shard}.tfrecord", max_records=250) as writer:
        writer.write_many(rk.encode_example({"image": im, "label": y}) for im, y in samples)

    spec = {"image": rk.Image(size=(32, 32)), "label": rk.FixedLen((), np.int64)}
    ds = Dataset("out", seed=0).shuffle().batch(32).map(partial(rk.parse_examples, features=spec))
    seen = 0
    for batch in dataloader(ds, num_workers=2):
        assert batch["image"].shape[1:] == (32, 32, 3)
        seen += len(batch["label"])
    print(f"recordkit: {seen} samples, images of {batch['image'].dtype}")
    assert seen == len(samples)
