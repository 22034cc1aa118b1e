"""Generated protobuf classes; regenerate with protos/generate.py."""
