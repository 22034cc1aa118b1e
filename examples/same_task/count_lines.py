"""Print the length of each version, shortest first: its lines that are neither blank nor a comment."""

from pathlib import Path

counts = {}
for script in Path(__file__).parent.glob("with_*.py"):
    lines = [line.strip() for line in script.read_text().splitlines()]
    counts[script.name] = sum(bool(line) and not line.startswith("#") for line in lines)
for name, count in sorted(counts.items(), key=lambda item: (item[1], item[0])):
    print(f"{name:20} {count:3d}")
