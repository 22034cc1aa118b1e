# /// script
# requires-python = ">=3.10"
# dependencies = ["recordkit[torch]", "numpy", "torch"]
# ///
"""Train a small PyTorch model from record files through a resumable DataLoader.

The script writes a toy regression data set (``y = x @ w + noise``) as ``tf.train.Example`` records into
four TFRecord files and one FFRecord file, then trains a linear model for a few epochs with
``recordkit.integrations.torch.dataloader``: two worker processes, each reading its own share of the records, a shuffle
buffer reseeded every epoch, and batches parsed in the workers with ``recordkit.parse_examples``. Half way
through it saves the loader's position, "crashes", and resumes in a new loader that delivers exactly the
records not yet seen.

Run it with ``python examples/train_torch/train_torch.py [OUTPUT_DIR]``; it takes a few seconds.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

import recordkit as rk
from recordkit.data import Dataset, Loader
from recordkit.integrations.torch import dataloader

FEATURES = 8
FEATURE_SPEC = {
    "x": rk.FixedLen((FEATURES,), np.float32),
    "y": rk.FixedLen((), np.float32),
    "id": rk.FixedLen((), np.int64),
}


def write_data(folder: Path, n: int = 2000) -> list[str]:
    """Write ``n`` examples over five files of two formats; return their paths."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=FEATURES).astype(np.float32)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    y = x @ w + 0.01 * rng.normal(size=n).astype(np.float32)
    names = [f"train-{i}.tfrecord" for i in range(4)] + ["train-4.ffr"]
    paths = [str(folder / name) for name in names]
    for part, path in enumerate(paths):
        with rk.open(path, "w") as writer:
            for i in range(part, n, len(paths)):
                writer.write(rk.encode_example({"x": x[i], "y": np.float32(y[i]), "id": i}))
    return paths


def to_tensors(batch: list[bytes]) -> dict[str, torch.Tensor]:
    """Parse a batch of serialized Examples into tensors (runs in the DataLoader workers)."""
    parsed = rk.parse_examples(batch, FEATURE_SPEC)
    return {name: torch.from_numpy(np.asarray(value)) for name, value in parsed.items()}


def make_loader(paths: list[str]) -> Loader:
    ds = Dataset(paths, seed=42).shuffle(256).batch(64).map(to_tensors)
    return dataloader(ds, num_workers=2)


def train_epoch(
    model: torch.nn.Module, opt: torch.optim.Optimizer, batches: Loader
) -> tuple[float, list[int]]:
    seen: list[int] = []
    loss = torch.tensor(0.0)
    for batch in batches:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(batch["x"]).squeeze(-1), batch["y"])
        loss.backward()
        opt.step()
        seen.extend(batch["id"].tolist())
    return float(loss.detach()), seen


def main(out: Path) -> None:
    paths = write_data(out)
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = make_loader(paths)
    for epoch in range(3):
        loss, seen = train_epoch(model, opt, loader)
        assert sorted(seen) == list(range(2000)), "every record exactly once per epoch"
        print(f"epoch {epoch}: last batch loss {loss:.5f}, {len(seen)} records")

    # Stop part-way through epoch 3, save the position, and resume it in a new loader.
    it = iter(loader)
    first = [next(it) for _ in range(10)]
    state = loader.state_dict()
    del it
    resumed = make_loader(paths)
    resumed.load_state_dict(state)
    _, rest = train_epoch(model, opt, resumed)
    head = [i for batch in first for i in batch["id"].tolist()]
    assert sorted(head + rest) == list(range(2000)), (
        "the resumed epoch completes the interrupted one"
    )
    print(f"epoch 3: {len(head)} records before the interruption, {len(rest)} after resuming")
    print(f"final loss on all data: {evaluate(model, paths):.5f}")


def evaluate(model: torch.nn.Module, paths: list[str]) -> float:
    with torch.no_grad():
        total, count = 0.0, 0
        for batch in Dataset(paths).batch(500).map(to_tensors):
            pred = model(batch["x"]).squeeze(-1)
            total += float(torch.nn.functional.mse_loss(pred, batch["y"], reduction="sum"))
            count += len(pred)
    return total / count


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
        target.mkdir(parents=True, exist_ok=True)
        main(target)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
