"""The payload kinds: what a format's records hold (:attr:`recordkit.formats.base.RecordFormat.payload`).

Code outside :mod:`recordkit.formats` compares a kind with these names: the kind ``"ofrecord"`` is spelt as
the OFRecord format's name, and format names are compared only inside :mod:`recordkit.formats`.
"""

from __future__ import annotations

__all__ = ["EXAMPLE_PAYLOAD", "OFRECORD_PAYLOAD"]

EXAMPLE_PAYLOAD = "example"
"""Records that are ``tf.train.Example`` messages (TFRecord's payload)."""

OFRECORD_PAYLOAD = "ofrecord"
"""Records that are OneFlow's ``OFRecord`` messages (OFRecord's payload)."""
