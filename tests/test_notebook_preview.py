"""The notebook views in a real browser: examples/notebook_preview runs in a Jupyter kernel (nbclient), is
exported to HTML (nbconvert) and rendered by headless Chromium, whose screenshot and DOM are checked.

The picture in docs/notebook.md is this test's screenshot: run it with ``RECORDKIT_NOTEBOOK_SCREENSHOT`` set
to a path (docs/_static/notebook-preview.png) to keep a copy there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

NOTEBOOK = (
    Path(__file__).resolve().parent.parent
    / "examples"
    / "notebook_preview"
    / "notebook_preview.ipynb"
)
WIDTH, HEIGHT = 1000, 1760
# The colours of the pictures the notebook writes (their ground; the square is the opposite colour).
COLOURS = [(220, 40, 40), (40, 160, 60), (40, 80, 200), (240, 190, 30)]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Chromium is not installed")
    return found


def run_browser(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def render(tmp_path: Path) -> tuple[Path, str]:
    """Run the notebook, export it to HTML and render it: the screenshot's path and the rendered DOM."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nbconvert = pytest.importorskip("nbconvert")
    pytest.importorskip("ipykernel")
    pytest.importorskip("PIL")
    browser = chromium()
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    page, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    html_path = tmp_path / "notebook_preview.html"
    html_path.write_text(page, encoding="utf-8")
    screenshot = tmp_path / "screenshot.png"
    url = html_path.as_uri()
    run_browser(
        browser,
        tmp_path / "profile-1",
        f"--screenshot={screenshot}",
        f"--window-size={WIDTH},{HEIGHT}",
        url,
    )
    dom = run_browser(browser, tmp_path / "profile-2", "--dump-dom", url).stdout
    return screenshot, dom


def near(pixel: tuple[int, ...], colour: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 3 for a, b in zip(pixel[:3], colour, strict=True))


def test_notebook_renders_tables_and_thumbnails_in_chromium(tmp_path: Path) -> None:
    from PIL import Image

    screenshot, dom = render(tmp_path)
    # The DOM: the three views, their tables and the pictures as embedded images.
    assert dom.count('class="rk-preview"') == 3
    for title in ("RecordReader", "Dataset", "parsed batch"):
        assert f"<b>{title}</b>" in dom
    images = re.findall(r'<img [^>]*src="data:image/png;base64,[^"]+"', dom)
    # 4 records read from the file, the first file's 4 records for the Dataset, 4 decoded rows of the batch.
    assert len(images) == 12
    assert "shape 3" in dom
    assert "Traceback" not in dom
    # The picture: the window's size, not blank, and the pictures' colours drawn on it.
    with Image.open(screenshot) as picture:
        assert picture.size == (WIDTH, HEIGHT)
        rgb = picture.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
    assert colours is not None
    assert len(colours) > 50  # text, table borders, headers and pictures: not a blank page
    counts = [(count, pixel) for count, pixel in colours]
    for colour in COLOURS:
        square = tuple(255 - c for c in colour)
        assert sum(count for count, pixel in counts if near(pixel, colour)) > 500, colour
        assert sum(count for count, pixel in counts if near(pixel, square)) > 500, square
    keep = os.environ.get("RECORDKIT_NOTEBOOK_SCREENSHOT")
    if keep:
        shutil.copyfile(screenshot, keep)
