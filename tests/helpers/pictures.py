"""Pictures embedded in HTML outputs: which images a ``text/html`` carries, and whether two
encoded images hold the same pixels (the sanitizer's copy is the PNG re-encoded losslessly)."""

from __future__ import annotations

import base64
import io
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

DATA_IMAGE = re.compile(r'src="data:(image/[a-z]+);base64,([^"]+)"')


def embedded_images(html: str) -> list[tuple[str, bytes]]:
    """Every ``<img src="data:image/...;base64,...">`` of ``html``: (mime type, decoded bytes)."""
    return [(mime, base64.b64decode(data)) for mime, data in DATA_IMAGE.findall(html)]


def pixels(encoded: bytes) -> tuple[tuple[int, int], bytes]:
    """An encoded image's size and RGB pixels."""
    from PIL import Image

    with Image.open(io.BytesIO(encoded)) as image:
        rgb = image.convert("RGB")
        return rgb.size, rgb.tobytes()


def same_pixels(a: bytes, b: bytes) -> bool:
    return pixels(a) == pixels(b)


def expanded() -> dict[str, torch.Tensor]:
    """A tensor and a broadcast (stride-0) view of it: the picture with the dot hatch."""
    import torch

    b = torch.tensor([1.0, 2.0, 3.0])
    return {"b": b, "b.expand(4, 3)": b.expand(4, 3)}


def raw_svg(obj: Any) -> tuple[str, set[str]]:
    """The diagram's SVG as matplotlib writes it, and the hatches of its layers."""
    from tensorviz.core.layout import as_layout
    from tensorviz.plan.diagram import diagram
    from tensorviz.render.mpl import render
    from tensorviz.render.theme import DESIGN_INCHES, hatches_of

    fig = render(diagram(as_layout(obj)), width=DESIGN_INCHES)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    hatches = hatches_of(fig)
    return buf.getvalue(), hatches
