import io
import os

import numpy as np
import torch
from make_samples import samples
from PIL import Image
from tfrecord import TFRecordWriter
from tfrecord.tools.tfrecord2idx import create_index
from tfrecord.torch.dataset import MultiTFRecordDataset

os.makedirs("out", exist_ok=True)
for shard in range(4):
    writer = TFRecordWriter(f"out/train-{shard}.tfrecord")
    for png, label in samples[shard * 250 : (shard + 1) * 250]:
        writer.write({"image": (png, "byte"), "label": (label, "int")})
    writer.close()
    create_index(f"out/train-{shard}.tfrecord", f"out/train-{shard}.index")


def decode(features):
    return np.array(Image.open(io.BytesIO(features["image"]))), features["label"][0]


ds = MultiTFRecordDataset(
    "out/train-{}.tfrecord",
    "out/train-{}.index",
    splits={str(shard): 0.25 for shard in range(4)},
    description={"image": "byte", "label": "int"},
    shuffle_queue_size=256,
    transform=decode,
    infinite=False,
)
seen = 0
for images, labels in torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2):
    assert images.shape[1:] == (32, 32, 3)
    seen += len(labels)
print(f"vahidk tfrecord: {seen} samples, images of {images.dtype}")
assert seen == len(samples)
