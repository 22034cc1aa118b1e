"""OneFlow's OFRecord decoders, by name and semantics, without OneFlow.

The public home of the decoders; they are defined in :mod:`recordkit.decode.oneflow`.
"""

from recordkit.decode.oneflow import (
    bytes_decoder,
    ofrecord_image_decoder,
    ofrecord_image_decoder_random_crop,
    raw_decoder,
)

__all__ = [
    "bytes_decoder",
    "ofrecord_image_decoder",
    "ofrecord_image_decoder_random_crop",
    "raw_decoder",
]
