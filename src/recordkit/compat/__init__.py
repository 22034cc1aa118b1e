"""The APIs of other libraries, over recordkit's readers: HFAiLab's ffrecord (:mod:`.ffrecord`) and OneFlow's
OFRecord reader and decoders (:mod:`.oneflow`)."""
