"""Small helpers shared by every layer: the context-manager base, where a warning points, and glibc's trim threshold."""
