import io

import numpy as np
from make_samples import samples
from PIL import Image
from streaming import MDSWriter, StreamingDataLoader, StreamingDataset

with MDSWriter(out="out", columns={"image": "bytes", "label": "int"}, size_limit=800_000) as writer:
    for png, label in samples:
        writer.write({"image": png, "label": label})


class Samples(StreamingDataset):
    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return np.array(Image.open(io.BytesIO(sample["image"]))), sample["label"]


ds = Samples(local="out", shuffle=True, shuffle_seed=0, batch_size=32)
seen = 0
for images, labels in StreamingDataLoader(ds, batch_size=32, num_workers=2):
    assert images.shape[1:] == (32, 32, 3)
    seen += len(labels)
print(f"streaming: {seen} samples, images of {images.dtype}")
assert seen == len(samples)
