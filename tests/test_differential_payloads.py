"""Generated payloads decoded by recordkit and by protobuf's own parser must agree (a short run).

The long run is ``python -m tests.fuzz --target diff-example`` (and ``diff-sequence-example``,
``diff-ofrecord``); see ``tests/fuzz/differential_payloads.py`` for what is generated and compared.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import SEED
from fuzz import run_target
from fuzz.differential_payloads import (
    DifferentialExampleTarget,
    DifferentialOFRecordTarget,
    DifferentialSequenceExampleTarget,
    Payload,
    check_example_batch,
    check_ofrecord_batch,
    check_sequence_batch,
)

import recordkit as rk

CASES = 300


@pytest.mark.parametrize(
    "target",
    [
        DifferentialExampleTarget(tensorflow=False),
        DifferentialSequenceExampleTarget(),
        DifferentialOFRecordTarget(),
    ],
    ids=lambda target: target.name,
)
def test_generated_payloads_agree_with_protobuf(target):
    summary = run_target(target, CASES, seed=SEED, timeout=60.0)
    assert not summary.failures, "\n".join(
        [*summary.lines(), *(failure.trace for failure in summary.failures[:3])]
    )
    # Both verdicts must be common: results compared, and records refused.
    assert summary.outcomes["ok"] > CASES
    assert summary.outcomes["DecodeError"] > CASES // 10


@pytest.mark.interop
def test_generated_payloads_agree_with_tensorflow():
    pytest.importorskip("tensorflow")
    target = DifferentialExampleTarget(tensorflow=True, tf_fraction=1.0)
    summary = run_target(target, 200, seed=SEED, timeout=60.0)
    assert not summary.failures, "\n".join(
        [*summary.lines(), *(failure.trace for failure in summary.failures[:3])]
    )
    assert summary.outcomes["TensorFlow read"] + summary.outcomes["TensorFlow refused"] > 10


def plain(*hexes: str) -> list[Payload]:
    """Records given as hex, none poisoned: the oracle reads them as they are."""
    return [Payload(bytes.fromhex(h), bytes.fromhex(h)) for h in hexes]


# An unpacked list beside a neighbour's empty list of the same kind (int64, then float).
NEIGHBOURS = [
    ("0a090a070a016112021a00", "0a0d0a0b0a016112061a0408050807", np.int64),
    ("0a090a070a016112021200", "0a130a110a0161120c120a0d0000c03f0d00002040", np.float32),
]
# A map entry whose value is written twice, the second switching the oneof and back.
ONEOF_SWITCH = "0a1b0a190a016b12050a030a0161120d12060a040000803f0a030a0162"
# An OFRecord int32_list whose varint is cut to 5 bytes (-7 as 32 bits).
INT32_VARINT = "0a0e0a0178120922070a05f9ffffff0f"


def specs_for(dtype: object) -> list[dict[str, object]]:
    return [
        {"a": rk.VarLen(dtype)},
        {"a": rk.FixedLen((), dtype)},
        {"a": rk.FixedLen((), dtype, default=0)},
        {"a": rk.FixedLenSequence((), dtype)},
    ]


@pytest.mark.parametrize("pair", NEIGHBOURS, ids=["int64", "float"])
@pytest.mark.parametrize("copies", [1, 8])
def test_unpacked_list_beside_an_empty_one_through_the_oracle(pair, copies):
    first, second, dtype = pair
    for order in ((first, second), (second, first)):
        batch = plain(*order) * copies
        for specs in specs_for(dtype):
            check_example_batch(batch, specs, random.Random(0))


def test_oneof_switch_in_a_repeated_value_through_the_oracle():
    for copies in (1, 9):
        batch = plain(ONEOF_SWITCH) * copies
        check_example_batch(batch, {"k": rk.VarLen(bytes)}, random.Random(0))
        check_example_batch(batch, {"k": rk.FixedLen((), bytes)}, random.Random(0))
    # The same record as a SequenceExample context and as an OFRecord (the feature map is the record).
    as_context = plain(ONEOF_SWITCH)
    check_sequence_batch(as_context * 9, {"k": rk.VarLen(bytes)}, {}, random.Random(0))
    as_ofrecord = plain(ONEOF_SWITCH[4:])
    check_ofrecord_batch(as_ofrecord * 9, {"k": rk.VarLen(bytes)}, random.Random(0))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64, np.int8])
def test_int32_varint_through_the_oracle(dtype):
    for copies in (1, 8):
        batch = plain(INT32_VARINT) * copies
        for specs in ({"x": rk.VarLen(dtype)}, {"x": rk.FixedLen((1,), dtype)}):
            for seed in range(4):  # raw_decoder and bytes_decoder are drawn by the rng
                check_ofrecord_batch(batch, specs, random.Random(seed))
