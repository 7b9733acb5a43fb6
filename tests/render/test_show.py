"""show(): one display bundle that works with no kernel (PNG, escaped HTML table, plain text)."""

from __future__ import annotations

import base64
import html

import pytest
import torch

import tensorviz as tv
from tensorviz.render.html.diagram import MAX_ROWS, table_rows
from tensorviz.render.show import Shown
from tests.helpers.models import TiedLM, seed_tensors
from tests.helpers.pictures import embedded_images, same_pixels

PNG = b"\x89PNG\r\n\x1a\n"


def test_bundle_has_png_html_and_text():
    shown = tv.show(seed_tensors())
    assert isinstance(shown, Shown)
    bundle = shown._repr_mimebundle_()
    assert sorted(bundle) == ["image/png", "text/html", "text/plain"]
    assert base64.b64decode(bundle["image/png"]) == shown.png and shown.png.startswith(PNG)
    assert bundle["text/plain"] == shown.diagram.to_text()
    # the sanitizer's copy inside the SVG: the same pixels, losslessly in fewer bytes
    [(mime, copy)] = embedded_images(bundle["text/html"])
    assert mime == "image/webp" and same_pixels(copy, shown.png) and len(copy) < len(shown.png)
    assert shown._repr_mimebundle_(include=["text/plain"]) == {"text/plain": bundle["text/plain"]}
    assert "image/png" not in shown._repr_mimebundle_(exclude=["image/png"])


def test_table_rows_list_every_drawn_view():
    shown = tv.show(seed_tensors())
    rows = table_rows(shown.diagram, shown.layout)
    assert rows == [
        ("a", "float32[8, 10, 50]", "(500, 50, 1)", "0", "[0, 16,000)", "#0: with b, c"),
        ("b", "float32[2, 10, 50]", "(500, 50, 1)", "1000", "[4,000, 8,000)", "#0: with a, c"),
        ("c", "float32[2, 10, 50]", "(500, 50, 1)", "2000", "[8,000, 12,000)", "#0: with a, b"),
    ]
    page = shown.to_html()
    for cell in ("float32[8, 10, 50]", "(500, 50, 1)", "[4,000, 8,000)", "group (by storage)"):
        assert html.escape(cell) in page


def test_span_groups_in_table():
    shown = tv.show(TiedLM(), by="span")
    rows = table_rows(shown.diagram, shown.layout)
    assert [(r[0], r[5]) for r in rows] == [
        ("wte.weight", "#0: with lm_head.weight"),
        ("lm_head.weight", "#0: with wte.weight"),
    ]
    assert "2 simple storages, 128 B not listed" in shown.to_html()


def test_html_escapes_hostile_names():
    evil = "<script>alert(1)</script>"
    t = torch.zeros(4)
    shown = tv.show({evil: t, "ok": t[:2]})
    page = shown.to_html()
    assert "<script" not in page
    assert html.escape(evil) in page
    assert evil in shown._repr_mimebundle_()["text/plain"]  # plain text is not HTML


def test_layout_repr_delegates_to_show():
    layout = tv.analyze(seed_tensors())
    bundle = layout._repr_mimebundle_()
    assert sorted(bundle) == ["image/png", "text/html", "text/plain"]
    assert bundle["text/plain"] == tv.show(layout).text


def test_long_tables_are_cut_and_collapsed():
    flat = torch.zeros(300 * 2, device="meta")
    shown = tv.show({f"p{i}": flat[2 * i : 2 * i + 2] for i in range(300)}, max_lanes=10)
    page = shown.to_html()
    assert f"… {300 - MAX_ROWS:,} more views" in page
    assert "<details open>" not in page and "<details>" in page
    assert page.count("<tr>") == MAX_ROWS + 2  # header, rows, the "more" row


def test_show_rejects_a_diagram_and_passes_options():
    d = tv.diagram(seed_tensors())
    with pytest.raises(TypeError, match="needs the Layout"):
        tv.show(d)
    shown = tv.show(seed_tensors(), names="^b$", dpi=50)
    assert [b.label for b in shown.diagram.bars] == ["b"]
    assert shown.png.startswith(PNG)


def test_width_in_inches_like_explore_and_render():
    from tensorviz.render.mpl import render

    def png_size(png):
        return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")

    narrow, wide = tv.show(seed_tensors(), width=6), tv.show(seed_tensors(), width=12, dpi=50)
    assert png_size(narrow.png)[0] == 600 and png_size(wide.png)[0] == 600
    fig = render(narrow.diagram, width=6)
    assert png_size(narrow.png) == (round(fig.get_figwidth() * 100), round(fig.get_figheight() * 100))
    assert png_size(tv.show(seed_tensors()).png)[0] == 614  # the default: laid out for a 590-px output (590/96 in)
    with pytest.raises(ValueError, match=r"inches.*for 800 pixels at dpi=100 pass width=8"):
        tv.show(seed_tensors(), width=800)
    with pytest.raises(ValueError, match="inches, e.g. width=8; got 'wide'"):
        tv.show(seed_tensors(), width="wide")
    with pytest.raises(ValueError, match="from 0.5 to 100; got -3"):
        tv.explain(torch.zeros(2), width=-3)


def test_table_of_a_safetensors_file_groups_by_shared_bytes(tmp_path):
    """Every tensor of a file is on the file's one storage; the table does not list them all as
    one group "with" each other."""
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(2, 2), "b": torch.zeros(3)}, tmp_path / "m.safetensors")
    shown = tv.show(tmp_path / "m.safetensors")
    assert [(r[0], r[5]) for r in table_rows(shown.diagram, shown.layout)] == [("a", "#0"), ("b", "#1")]
    assert html.escape("group (by shared bytes within a file)") in shown.to_html()
    assert shown.diagram.header.text.startswith("2 tensors · 1 file · 0 shared groups")
