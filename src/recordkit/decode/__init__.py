"""The decoding layer: record payloads to and from Python values and numpy arrays.

Modules, bottom up:

* ``_wire`` -- a protobuf wire-format scanner over any buffer (no protobuf runtime): the one reader of
  Example, SequenceExample and OFRecord payloads, under every decoder of this package;
* ``messages`` -- encode and decode one ``tf.train.Example``, ``SequenceExample`` or ``OFRecord``;
* ``payloads`` -- the payload kinds, and ``detect_payload``, which tells them from a sample of records
  (what ``recordkit info`` reports);
* ``images`` -- the ``Image`` spec: encoded JPEG/PNG features to uint8 arrays
  (Pillow, loaded on the first image), and OneFlow's random crop windows;
* ``columns`` -- a batch of payloads to per-feature columns of numpy values;
* ``specs`` -- the feature specs, ``Ragged``, and the :class:`ColumnReader` that
  turns columns into the arrays a spec asks for (TensorFlow's or OneFlow's rules);
* ``sparse``, ``partitions`` -- the specs that read several features of a record: ``Sparse`` (values at
  indices read from other features, a ``SparseArray``) and ``Partitioned`` (values cut into nested rows by
  partitions read from other features, a ``Ragged``);
* ``tables`` -- pyarrow tables and pandas DataFrames to records, and parsed batches to Arrow (pyarrow,
  loaded on first use);
* ``parsing`` -- the batch parsers ``parse_examples``, ``parse_sequence_examples``, ``parse_ofrecords``;
* ``preview`` -- the notebook tables of records (shown as ``payloads`` tells and decodes them) and of parsed
  batches, for the ``_repr_html_`` of readers, datasets and ``ParsedBatch``.

:mod:`recordkit.compat.oneflow` builds OneFlow's decoders on ``columns``, ``specs`` and ``images``.
Each public name is imported from the module here that defines it
(``recordkit.decode.messages.int64_feature``); the most used are also at the top level
(``rk.parse_examples``, ``rk.Image``, ``rk.encode_examples``). This package imports nothing until one of
its modules is imported.
"""
