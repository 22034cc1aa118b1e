"""The decoding layer: record payloads to and from Python values and numpy arrays.

Modules, bottom up:

* ``_wire`` -- a protobuf wire-format scanner over any buffer (no protobuf runtime);
* ``messages`` -- encode and decode one ``tf.train.Example``, ``SequenceExample`` or ``OFRecord``;
* ``_columns`` and ``parsing`` -- batches of payloads to numpy arrays, described by specs;
* ``images`` -- the :class:`~recordkit.parsing.Image` spec: encoded JPEG/PNG features to uint8 arrays
  (Pillow, loaded on the first image);
* ``oneflow`` -- OneFlow's OFRecord decoders by name and semantics, its image decoders included;
* ``tables`` -- pyarrow tables and pandas DataFrames to records, and parsed batches to Arrow (pyarrow,
  loaded on first use).

Users import the public names from ``recordkit`` (``rk.parse_examples``, ``rk.Image``,
``rk.encode_examples``), or from the public modules :mod:`recordkit.example`, :mod:`recordkit.parsing` and
:mod:`recordkit.compat.oneflow`, which re-export what is defined here. This package imports nothing until one of its modules is imported.
"""
