import os

import tensorflow as tf
from make_samples import samples

os.makedirs("out", exist_ok=True)
for shard in range(4):
    with tf.io.TFRecordWriter(f"out/train-{shard}.tfrecord") as writer:
        for png, label in samples[shard * 250 : (shard + 1) * 250]:
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())

spec = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def decode(record):
    features = tf.io.parse_single_example(record, spec)
    return tf.io.decode_png(features["image"], channels=3), features["label"]


ds = (
    tf.data.Dataset.list_files("out/train-*.tfrecord", seed=0)
    .interleave(tf.data.TFRecordDataset, num_parallel_calls=2)
    .shuffle(256, seed=0)
    .map(decode, num_parallel_calls=2)
    .batch(32)
)
seen = 0
for images, labels in ds:
    assert images.shape[1:] == (32, 32, 3)
    seen += len(labels)
print(f"tf.data: {seen} samples, images of {images.dtype}")
assert seen == len(samples)
