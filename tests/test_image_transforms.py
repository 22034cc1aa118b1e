"""The training and evaluation transforms of rk.Image: crops, flips, the resize backends, DCT scaling,
the CHW layout, the decoding threads, and the seeds that keep a resumed pipeline's crops exact.

Oracles: TensorFlow's ``tf.image.resize`` (with and without antialiasing) and ``tf.image.crop_to_bounding_box``
for pixels (skipped without TensorFlow); torchvision's documented ``RandomResizedCrop`` rule (area uniform in
``scale``, log aspect ratio uniform in ``ratio``, 10 attempts, a centred fallback) for the crop windows,
checked as distributions; a PNG decodes to the array it was encoded from.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pytest

import recordkit as rk
from recordkit.data import Dataset
from recordkit.decode import image_windows, images
from recordkit.decode.image_windows import center_crop_window, random_resized_crop_window
from recordkit.errors import DecodeError
from recordkit.support.seeding import seeded

PILImage = pytest.importorskip("PIL.Image")


def photo(height: int, width: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack(
        [(x * 0.8 + 40 * np.sin(y / 7)) % 256, (y + 30 * np.cos(x / 11)) % 256, (x + y) % 256], -1
    )
    return np.clip(base + rng.normal(0, 10, base.shape), 0, 255).astype(np.uint8)


def encode(pixels: np.ndarray, fmt: str = "PNG", **options: Any) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, fmt, **options)
    return buffer.getvalue()


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    error = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if error == 0 else 10 * math.log10(255**2 / error)


def parse(payloads: list[bytes], spec: rk.Image) -> Any:
    records = [rk.encode_example({"image": p, "label": i}) for i, p in enumerate(payloads)]
    return rk.parse_examples(records, {"image": spec})["image"]


# -- the crop windows ---------------------------------------------------------------------------------


def test_random_resized_crop_follows_torchvisions_distribution():
    """Area uniform in scale, log ratio uniform in ratio, placement uniform, on an image where every
    first attempt fits (a 1000 x 1000 image and ratios near 1)."""
    rng = np.random.default_rng(0)
    windows = [
        random_resized_crop_window(1000, 1000, rng, scale=(0.2, 0.6), ratio=(0.9, 1.1))
        for _ in range(4000)
    ]
    areas = np.array([w.height * w.width / 1e6 for w in windows])
    logs = np.array([math.log(w.width / w.height) for w in windows])
    assert not any(w.fallback for w in windows)
    assert areas.min() >= 0.19
    assert areas.max() <= 0.61
    # uniform on [0.2, 0.6]: mean 0.4, standard deviation 0.4 / sqrt(12)
    assert abs(areas.mean() - 0.4) < 0.01
    assert abs(areas.std() - 0.4 / math.sqrt(12)) < 0.01
    assert abs(logs.mean()) < 0.01
    assert logs.min() >= math.log(0.9) - 0.01
    assert logs.max() <= math.log(1.1) + 0.01
    for w in windows:
        assert 0 <= w.top <= 1000 - w.height
        assert 0 <= w.left <= 1000 - w.width
    # placement uniform: the free space left of the window is used evenly
    slack = np.array([w.left / max(1, 1000 - w.width) for w in windows])
    assert abs(slack.mean() - 0.5) < 0.02


@pytest.mark.parametrize(
    ("height", "width", "want"),
    [
        (10, 1000, (10, 13)),  # too wide: height kept, width = round(10 * 4/3)
        (1000, 10, (13, 10)),  # too tall: width kept, height = round(10 / (3/4))
    ],
)
def test_random_resized_crop_fallback_is_centred_and_clamps_the_ratio(height, width, want):
    """An image too elongated for any drawn window (scale near 1) falls back as torchvision does."""
    rng = np.random.default_rng(1)
    window = random_resized_crop_window(height, width, rng, scale=(0.99, 1.0))
    assert window.fallback
    assert (window.height, window.width) == want
    assert window.top == (height - want[0]) // 2
    assert window.left == (width - want[1]) // 2


def test_center_crop_window_is_a_short_side_resize_and_a_centre_crop():
    # Resize(256) then CenterCrop(224) of a 512 x 640 image keeps its centre 448 x 448
    assert center_crop_window(512, 640, (224, 224), 0.875)[:4] == (32, 96, 448, 448)
    # a portrait image: the short side is the width
    assert center_crop_window(640, 512, (224, 224), 0.875)[:4] == (96, 32, 448, 448)
    # never more than the image
    assert center_crop_window(100, 100, (224, 224), 1.0)[:4] == (0, 0, 100, 100)


# -- pixels against TensorFlow -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.mark.interop
def test_random_crop_pixels_are_tensorflows_crop_then_antialiased_resize(tf):
    """The window a seed chooses, cut and resized by TensorFlow, is what rk.Image returns."""
    source = photo(120, 160, seed=3)
    png = encode(source)
    spec = rk.Image(size=(48, 64), crop="random", scale=(0.3, 0.9))
    with seeded(42):
        got = parse([png], spec)[0]
        rng = image_windows.record_rng(png, 42, None)
    window = random_resized_crop_window(120, 160, rng, scale=(0.3, 0.9))
    cut = tf.image.crop_to_bounding_box(
        source, window.top, window.left, window.height, window.width
    )
    want = tf.image.resize(cut, (48, 64), antialias=True).numpy()
    assert np.abs(got.astype(np.float64) - want).max() <= 1.0


@pytest.mark.interop
def test_antialias_false_is_tensorflows_default_resize(tf):
    pytest.importorskip("cv2")
    source = photo(256, 320, seed=4)
    got = parse([encode(source)], rk.Image(size=(224, 224), antialias=False))[0]
    want = tf.image.resize(source, (224, 224)).numpy()  # bilinear, antialias=False
    assert psnr(got, want) >= 50
    assert np.abs(got.astype(np.float64) - want).max() <= 1.0


@pytest.mark.interop
def test_center_crop_pixels_are_tensorflows_crop_then_antialiased_resize(tf):
    """The centre window, cut and resized by TensorFlow, is what rk.Image(crop="center") returns."""
    source = photo(300, 400, seed=5)
    got = parse([encode(source)], rk.Image(size=(112, 112), crop="center"))[0]
    window = center_crop_window(300, 400, (112, 112), 0.875)
    cut = tf.image.crop_to_bounding_box(
        source, window.top, window.left, window.height, window.width
    )
    want = tf.image.resize(cut, (112, 112), antialias=True).numpy()
    assert np.abs(got.astype(np.float64) - want).max() <= 1.0


@pytest.mark.interop
@pytest.mark.parametrize("crop", [None, "random"])
def test_dct_scaling_keeps_the_antialiased_quality(tf, crop):
    """A large JPEG decoded at a reduced scale and resized stays within 40 dB of TensorFlow's full
    decode and antialiased resize of the same window."""
    source = photo(1080, 1440, seed=6)
    data = encode(source, "JPEG", quality=95)
    spec = rk.Image(size=(224, 224), crop=crop, scale=(0.6, 1.0))
    with seeded(7):
        got = parse([data], spec)[0]
        full = parse(
            [data], rk.Image(size=(224, 224), crop=crop, scale=(0.6, 1.0), dct_scaling=False)
        )[0]
        rng = image_windows.record_rng(data, 7, None)
    decoded = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE").numpy()
    if crop is not None:
        w = random_resized_crop_window(1080, 1440, rng, scale=(0.6, 1.0))
        decoded = decoded[w.top : w.top + w.height, w.left : w.left + w.width]
    want = tf.image.resize(decoded, (224, 224), antialias=True).numpy()
    assert psnr(full, want) >= 45
    # DCT scaling filters in the frequency domain, not with a triangle: the whole image stays above
    # 40 dB, a crop window (resampled from a sub-pixel position) above 37
    assert psnr(got, want) >= (40 if crop is None else 37)
    assert not np.array_equal(got, full)  # the reduced decode did run


# -- layout, flips, threads, errors ---------------------------------------------------------------------


def test_chw_layout_is_a_view_of_the_hwc_batch():
    pngs = [encode(photo(30, 40, seed=i)) for i in range(3)]
    hwc = parse(pngs, rk.Image(size=(16, 24)))
    chw = parse(pngs, rk.Image(size=(16, 24), layout="CHW"))
    assert chw.shape == (3, 3, 16, 24)
    np.testing.assert_array_equal(chw, hwc.transpose(0, 3, 1, 2))
    assert chw.base is not None
    assert chw.transpose(0, 2, 3, 1).flags.c_contiguous
    free = parse(pngs, rk.Image(layout="CHW"))
    assert [a.shape for a in free] == [(3, 30, 40)] * 3


def test_flip_mirrors_about_half_the_images_exactly():
    source = photo(8, 12, seed=2)
    pngs = [encode(source)] * 1 + [encode(photo(8, 12, seed=s)) for s in range(1, 200)]
    plain = parse(pngs, rk.Image(size=(8, 12)))
    with seeded(3):
        flipped = parse(pngs, rk.Image(size=(8, 12), flip=True))
    mirrored = [np.array_equal(f, p[:, ::-1]) for f, p in zip(flipped, plain, strict=True)]
    same = [np.array_equal(f, p) for f, p in zip(flipped, plain, strict=True)]
    assert all(m or s for m, s in zip(mirrored, same, strict=True))
    assert 60 <= sum(mirrored) <= 140


def test_threads_give_the_same_pixels_and_errors_as_one_thread(monkeypatch):
    pngs = [encode(photo(20, 30, seed=i)) for i in range(12)]
    spec = rk.Image(size=(16, 16), crop="random", flip=True)
    outputs = []
    for threads in (1, 4):
        monkeypatch.setattr(images, "THREADS", threads)
        with seeded(11):
            outputs.append(parse(pngs, spec))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    bad = [*pngs[:5], b"not an image", *pngs[5:8], b"\xff\xd8 broken", *pngs[8:]]
    for threads in (1, 4):
        monkeypatch.setattr(images, "THREADS", threads)
        with pytest.raises(DecodeError) as caught:
            parse(bad, spec)
        assert caught.value.index == 5
        assert caught.value.feature == "image"


def test_without_a_seed_crops_differ_between_calls():
    png = encode(photo(64, 64))
    spec = rk.Image(size=(8, 8), crop="random")
    draws = {parse([png], spec)[0].tobytes() for _ in range(8)}
    assert len(draws) > 1


def test_spec_checks_its_transform_arguments():
    for bad, error in [
        ({"crop": "middle", "size": (4, 4)}, ValueError),
        ({"crop": "random"}, ValueError),  # a crop needs a size
        ({"scale": (0.5, 0.2)}, ValueError),
        ({"ratio": (0, 1)}, ValueError),
        ({"crop_fraction": 0}, ValueError),
        ({"flip": 1}, TypeError),
        ({"layout": "NCHW"}, ValueError),
    ]:
        with pytest.raises(error):
            rk.Image(**bad)
    with pytest.raises(TypeError, match=r"\(224, 224\)"):
        rk.Image(size=224)
    with pytest.raises(ValueError, match="scale"):
        rk.Image(size=(4, 4), crop="random", scale=(2, 3))


# -- seeds: the pipeline's seed and epoch, exact on resume ---------------------------------------------


class ParseCrops:
    def __call__(self, batch: list[bytes]) -> Any:
        spec = {
            "image": rk.Image(size=(12, 12), crop="random", flip=True),
            "label": rk.FixedLen((), np.int64),
        }
        return rk.parse_examples(batch, spec)


def write_shards(tmp_path) -> list[str]:
    paths = []
    for shard in range(2):
        path = str(tmp_path / f"part-{shard}.tfrecord")
        with rk.open(path, "w") as writer:
            for i in range(shard * 10, shard * 10 + 10):
                png = encode(photo(24, 32, seed=i))
                writer.write(rk.encode_example({"image": png, "label": i}))
        paths.append(path)
    return paths


def batches(dataset: Any) -> list[tuple[list[int], bytes]]:
    return [(b["label"].tolist(), b["image"].tobytes()) for b in dataset]


def test_pipeline_crops_follow_seed_and_epoch_and_resume_exactly(tmp_path):
    paths = write_shards(tmp_path)
    ds = Dataset(paths, seed=4).shuffle(8).batch(4).map(ParseCrops())
    first = batches(ds)
    assert batches(Dataset(paths, seed=4).shuffle(8).batch(4).map(ParseCrops())) == first
    ds.set_epoch(1)
    assert batches(ds) != first  # a new epoch: new order and new crops
    by_label_0 = {label: None for b in first for label in b[0]}
    assert len(by_label_0) == 20
    # resume after two batches: the rest is what the uninterrupted epoch gave
    ds = Dataset(paths, seed=4).shuffle(8).batch(4).map(ParseCrops())
    it = iter(ds)
    head = [next(it), next(it)]
    state = ds.state_dict()
    restored = Dataset(paths, seed=4).shuffle(8).batch(4).map(ParseCrops())
    restored.load_state_dict(state)
    assert [(b["label"].tolist(), b["image"].tobytes()) for b in head] + batches(restored) == first


def test_loader_workers_crop_as_one_process_does(tmp_path):
    from recordkit.data import loader

    paths = write_shards(tmp_path)
    one = sorted(batches(Dataset(paths, seed=9).batch(5).map(ParseCrops())))
    pipeline = Dataset(paths, seed=9).batch(5).map(ParseCrops())
    two = sorted(
        (b["label"].tolist(), b["image"].tobytes()) for b in loader(pipeline, num_workers=2)
    )
    assert one == two


def _decode_here(pngs: list[bytes]) -> bytes:
    return bytes(parse(pngs, rk.Image(size=(8, 8))).tobytes())


def test_a_forked_process_decodes_on_threads_of_its_own(monkeypatch):
    """The parent's pool has no threads in a forked child; the child must not wait on it."""
    import multiprocessing

    monkeypatch.setattr(images, "THREADS", 2)
    pngs = [encode(photo(16, 16, seed=i)) for i in range(4)]
    here = _decode_here(pngs)  # the parent's pool now exists
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_decode_here, (pngs,)).get(timeout=60) == here
