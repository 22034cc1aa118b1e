import os

import torch
import webdataset as wds
from make_samples import samples

os.makedirs("out", exist_ok=True)
with wds.ShardWriter("out/train-%d.tar", maxcount=250) as sink:
    for key, (png, label) in enumerate(samples):
        sink.write({"__key__": f"{key:04d}", "png": png, "cls": label})

ds = (
    wds.WebDataset("out/train-{0..3}.tar", shardshuffle=4, seed=0)
    .shuffle(256)
    .decode("rgb8")
    .to_tuple("png", "cls")
    .batched(32)
)
seen = 0
for images, labels in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2):
    assert images.shape[1:] == (32, 32, 3)
    seen += len(labels)
print(f"webdataset: {seen} samples, images of {images.dtype}")
assert seen == len(samples)
