"""OneFlow's OFRecord decoders, by name and semantics, without OneFlow.

The public home of the decoders: the raw and bytes decoders, and the image decoders with their crop-window
rule. They are defined in :mod:`recordkit.decode.oneflow` and :mod:`recordkit.decode.images`.
"""

from recordkit.decode.images import CropWindow, random_crop_window
from recordkit.decode.oneflow import (
    bytes_decoder,
    ofrecord_image_decoder,
    ofrecord_image_decoder_random_crop,
    raw_decoder,
)

__all__ = [
    "CropWindow",
    "bytes_decoder",
    "ofrecord_image_decoder",
    "ofrecord_image_decoder_random_crop",
    "random_crop_window",
    "raw_decoder",
]
