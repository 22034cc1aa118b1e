"""The leading bytes that tell an encoded image's format: the one list the notebook preview, the image
decoders and the HuggingFace features go by."""

from __future__ import annotations

__all__ = ["IMAGE_SIGNATURES", "JPEG_SIGNATURE", "PNG_SIGNATURE"]

#: A JPEG file starts with these bytes (the SOI marker and the first marker's 0xFF).
JPEG_SIGNATURE = b"\xff\xd8\xff"
#: A PNG file starts with these bytes.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The starts of JPEG, PNG, GIF and BMP files (for ``bytes.startswith``).
IMAGE_SIGNATURES = (JPEG_SIGNATURE, PNG_SIGNATURE, b"GIF87a", b"GIF89a", b"BM")
