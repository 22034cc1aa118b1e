"""Encode and decode one ``tf.train.Example``, ``SequenceExample`` or ``OFRecord``.

The public home of the message helpers; they are defined in :mod:`recordkit.decode.messages`, whose
``__all__`` this module re-exports.
"""

from recordkit.decode.messages import *
from recordkit.decode.messages import __all__ as __all__  # noqa: PLC0414 - re-exported
