"""The explorer's compare mode in a real JupyterLab (issue 23 item 3): ``tv.explore(a, compare=b)``
draws both sides row by row in the canvas; hovering a changed row shows both sides' facts in the
tooltip, a click selects the pair (the details show both sides), the keyboard reaches the rows
(Tab, arrows, Enter); at 1024 and 1400 px, light and dark. Then a 70B-sized Llama (meta) against
itself with one layer's dtype changed: the rows arrive, bounded, and the hover answers.
Screenshots go to ``test-artifacts/browser/compare_*.png``, timings to ``compare_70b.json``.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.labserver import SHOTS, TOKEN, lab_server, open_notebook, run_all, set_theme, write_notebook
from tests.helpers.models import LLAMA_70B_CONFIG

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

#: a: a small tied model; b: the same saved under "module.", one weight in float16, the tie
#: lost (lm_head a copy), one layer's bias gone and an extra buffer.
SMALL = """\
import torch
import tensorviz as tv

emb = torch.zeros(64, 16)
a = {"embed.weight": emb, "lm_head.weight": emb}
for i in range(6):
    a[f"layers.{i}.q.weight"] = torch.zeros(16, 16)
    a[f"layers.{i}.q.bias"] = torch.zeros(16)
    a[f"layers.{i}.mlp.weight"] = torch.zeros(64, 16)
b = {f"module.{k}": v for k, v in a.items()}
b["module.layers.3.q.weight"] = a["layers.3.q.weight"].half()
b["module.lm_head.weight"] = emb.clone()
del b["module.layers.5.q.bias"]
b["module.rotary.inv_freq"] = torch.zeros(8)
ex = tv.explore(a, compare=b, snapshot=False)
ex"""

#: a: a tie (embed ≡ lm_head) and 3,005 one-float slices of one storage; b: the tie lost (a
#: float16 embed, lm_head a copy), the last slice gone. 3 rows are marked, so 2,997 of the 3,004
#: unchanged ones are sent (ROW_BUDGET 3,000): s.2997 … s.3003 reach the hover from the kernel.
#: The second explorer starts zoomed onto the slices s.2996 … s.3004.
LANES = """\
import torch
import tensorviz as tv

emb = torch.zeros(64, 16)
base = torch.zeros(3005)
a = {"embed.weight": emb, "lm_head.weight": emb, **{f"s.{i}": base[i : i + 1] for i in range(3005)}}
b = {"embed.weight": emb.half(), "lm_head.weight": emb.clone(), **{f"s.{i}": base[i : i + 1] for i in range(3004)}}
tv.explore(a, compare=b, snapshot=False)"""
ZOOMED = """tv.explore(a, compare=b, storage="s.0", byte_range=(11984, 12020), snapshot=False)"""

#: Opened with one source; the "compare with…" row picks b: a file written here by
#: safetensors' save_file (the tie cloned, head in float16, a buffer added), a file that is not
#: safetensors (its name markup: shown escaped), or the named choice "wrapped".
PICK = """\
import torch
import tensorviz as tv
from safetensors.torch import save_file

emb = torch.zeros(10, 4)
a = {"emb.weight": emb, "head.weight": emb, "mid.bias": torch.zeros(3)}
b = {"emb.weight": emb.clone(), "head.weight": emb.half(), "mid.bias": torch.zeros(3), "inv": torch.zeros(2)}
save_file(b, "b.safetensors")
open("bad<b>.safetensors", "wb").write(b"\\xff" * 8)
tv.explore(a, compare_choices={"wrapped": {f"module.{k}": v for k, v in a.items()}}, snapshot=False)"""

LLAMA = """\
import json
import time
import torch
import tensorviz as tv
from transformers import LlamaConfig, LlamaForCausalLM

cfg = LlamaConfig({LLAMA_70B_CONFIG})
with torch.device("meta"):
    llama = LlamaForCausalLM(cfg)
b = {k: (v.to(torch.bfloat16) if k.startswith("model.layers.40.") else v) for k, v in llama.state_dict().items()}
t0 = time.perf_counter()
ex70 = tv.explore(llama, compare=b, snapshot=False)
print(json.dumps({"explore_s": round(time.perf_counter() - t0, 2), "payload_bytes": ex70.payload_nbytes}))
ex70""".replace("{LLAMA_70B_CONFIG}", LLAMA_70B_CONFIG)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    write_notebook(root, "small.ipynb", [SMALL])
    write_notebook(root, "llama.ipynb", [LLAMA])
    write_notebook(root, "lanes.ipynb", [LANES, ZOOMED])
    write_notebook(root, "silent.ipynb", [LANES, ZOOMED])
    write_notebook(root, "pick.ipynb", [PICK])
    with lab_server(root, side, SHOTS) as url:
        yield url


def _open(pg, lab: str, stem: str, width: int, height: int = 2400):
    """Open and run the notebook ``stem`` in the shared ``page`` (conftest), ``width`` px wide."""
    from playwright.sync_api import expect

    pg.set_viewport_size({"width": width, "height": height})
    open_notebook(pg, lab, f"{stem}.ipynb")
    run_all(pg)
    ex = pg.locator(".jp-OutputArea-output .tvz-explorer").first
    expect(ex.locator(".tvz-cmp-summary")).to_contain_text("matched", timeout=180_000)
    pg.wait_for_timeout(300)
    return pg, ex


def _hover(pg, ex, key: str, hook: str = "compare", box: str = ".tvz-cmp") -> dict:
    """Move the mouse onto the row of ``key`` (``hook="locate"``, ``box=".tvz-cv-scroll"``: the
    bar of a view in the lanes), scrolled into view in its box, the box into the page's view."""
    at = ex.locator(".tvz-cv").evaluate(
        """(el, [key, hook, box]) => { el.tvz[hook](key); el.querySelector(box).scrollIntoView({ block: "center" });
        return el.tvz[hook](key); }""",
        [key, hook, box],
    )
    assert at is not None, key
    pg.mouse.move(at["x"], at["y"] - 30)
    pg.mouse.move(at["x"], at["y"])
    return at


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
@pytest.mark.parametrize("width", [1024, 1400])
def test_compare_hover_select_keyboard(lab, page, theme, width):
    from playwright.sync_api import expect

    set_theme(lab, theme)
    pg, ex = _open(page, lab, "small", width)
    pg.wait_for_function(f"document.body.dataset.jpThemeName === {json.dumps(theme)}")
    pg.wait_for_timeout(300)
    cmp = ex.locator(".tvz-cmp")
    expect(ex.locator(".tvz-cmp-summary")).to_have_text(
        "20 tensors in a, 20 in b, 19 matched (19 by rule) · only in a 1, only in b 1, tie lost 2, dtype 1 · differ"
    )
    expect(cmp.locator(".tvz-cmp-legend")).to_contain_text("Δdtype 1")
    expect(cmp.locator(".tvz-cmp-rules")).to_contain_text("19 names matched with prefix 'module.' removed from b")
    # hover the changed row: both sides in the tooltip
    _hover(pg, ex, "layers.3.q.weight")
    tip = ex.locator(".tvz-cv > .tvz-tip")
    expect(tip).to_be_visible()
    for line in (
        "layers.3.q.weight → module.layers.3.q.weight",
        "Δ dtype · → renamed",
        "a: layers.3.q.weight",
        "b: module.layers.3.q.weight",
        "dtype   float32                  ≠ float16",
        "shape   (16, 16)                   (16, 16)",
        "bytes   a: 1 KiB (1,024 B)",
        "      ≠ b: 512 B",
    ):
        expect(tip).to_contain_text(line)
    pg.screenshot(path=str(SHOTS / f"compare_hover_{_stem(theme)}_{width}.png"))
    # a click selects the pair: the details show both sides
    at = _hover(pg, ex, "lm_head.weight")
    expect(tip).to_contain_text("tie     a: tied with embed.weight")
    pg.mouse.click(at["x"], at["y"])
    details = ex.locator(".tvz-details")
    expect(details).to_contain_text("lm_head.weight: tie lost, renamed")
    expect(details).to_contain_text("tied with embed.weight")
    # the explain pane draws both sides of the selected pair, each under a heading naming it
    ex.get_by_role("button", name="explain selected").click()
    pane = ex.locator(".tvz-explain")
    sides = pane.locator(".tvz-side")
    expect(sides).to_have_count(2)
    expect(sides.nth(0)).to_have_text("a · dict")
    expect(sides.nth(1)).to_have_text("b · dict")
    expect(pane).to_contain_text("How each element of module.lm_head.weight maps")
    expect(pane.locator(".tvx-canvas")).to_have_count(2)
    pane.screenshot(path=str(SHOTS / f"compare_explain_{_stem(theme)}_{width}.png"))
    # the keyboard: Tab to the rows, End, Enter selects the last row (only in b)
    pg.mouse.move(5, 5)
    ex.get_by_role("button", name="stop comparing").focus()  # the "compare with…" row's last: the last control above
    pg.keyboard.press("Tab")
    assert cmp.evaluate("el => document.activeElement === el.querySelector('canvas')")
    pg.keyboard.press("End")
    pg.keyboard.press("Enter")
    expect(details).to_contain_text("module.rotary.inv_freq: only in b")
    expect(tip).to_contain_text("+ only in b")
    assert cmp.evaluate("el => el.dataset.cursor") == "20"
    ex.screenshot(path=str(SHOTS / f"compare_{_stem(theme)}_{width}.png"))
    assert not pg.errors, pg.errors
    if theme != "JupyterLab Light":
        set_theme(lab, "JupyterLab Light")


def _stem(theme: str) -> str:
    return theme.lower().replace("jupyterlab ", "").replace(" ", "_")


def _hover_bar(pg, ex, name: str) -> None:
    """Move the mouse onto the bar of ``name`` in the lanes."""
    _hover(pg, ex, name, "locate", ".tvz-cv-scroll")


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
@pytest.mark.parametrize("width", [1024, 1400])
def test_hover_on_a_lane_shows_the_matched_view_in_b(lab, page, theme, width):
    """Hovering a view of a in the lanes (not the compare rows) shows its matched view in b:
    from the rows sent, from the kernel for a row not sent, and "only in a" when unmatched."""
    from playwright.sync_api import expect

    set_theme(lab, theme)
    pg = page
    pg.set_viewport_size({"width": width, "height": 1800})
    open_notebook(pg, lab, "lanes.ipynb")
    run_all(pg)
    explorers = pg.locator(".jp-OutputArea-output .tvz-explorer")
    expect(explorers.nth(1).locator(".tvz-cmp-summary")).to_contain_text("matched", timeout=180_000)
    pg.wait_for_function(f"document.body.dataset.jpThemeName === {json.dumps(theme)}")
    ex = explorers.nth(0)
    expect(ex.locator(".tvz-cmp-summary")).to_have_text(
        "3,007 tensors in a, 3,006 in b, 3,006 matched · only in a 1, tie lost 2, dtype 1 · differ"
    )
    expect(ex.locator(".tvz-cmp-foot")).to_contain_text("… 7 more unchanged rows not sent")
    tip = ex.locator(".tvz-cv > .tvz-tip")
    _hover_bar(pg, ex, "embed.weight")  # grouped by storage: a bar per name of the tie
    expect(tip).to_be_visible()
    text = tip.inner_text()
    tail = text[text.index("in b: ") :].split("\n")
    assert tail == [
        "in b: embed.weight",
        "≢ tie lost · Δ dtype",
        "        a                          b",
        "shape   (64, 16)                   (64, 16)",
        "dtype   float32                  ≠ float16",
        "stride  (16, 1)                    (16, 1)",
        "offset  0                          0",
        "bytes   a: 4 KiB (4,096 B)",
        "      ≠ b: 2 KiB (2,048 B)",
        "storage a: #0 cpu · 4 KiB",
        "        b: #0 cpu · 2 KiB",
        "tie     a: tied with lm_head.weight",
        "      ≠ b: none",
    ], text
    pg.screenshot(path=str(SHOTS / f"compare_lane_hover_{_stem(theme)}_{width}.png"))
    zoomed = explorers.nth(1)
    tip = zoomed.locator(".tvz-cv > .tvz-tip")
    _hover_bar(pg, zoomed, "s.3000")  # its row was not sent: the kernel answers
    expect(tip).to_contain_text("in b: s.3000\nno change\n")
    expect(tip).to_contain_text("offset  3,000                      3,000")
    expect(tip).to_contain_text("bytes   a: 4 B\n        b: 4 B")
    pg.screenshot(path=str(SHOTS / f"compare_lane_kernel_{_stem(theme)}_{width}.png"))
    _hover_bar(pg, zoomed, "s.3004")
    expect(tip).to_contain_text("in b: — only in a (no tensor of b matches it by name or rule)")
    assert not pg.errors, pg.errors
    if theme != "JupyterLab Light":
        set_theme(lab, "JupyterLab Light")


def _shut_down_kernel_of(lab: str, path: str) -> None:
    """Shut down the kernel of the notebook at ``path`` (the server's REST API), as when a
    notebook saved with its widgets is opened with no kernel to answer."""
    import urllib.request

    with urllib.request.urlopen(f"{lab}/api/sessions?token={TOKEN}", timeout=10) as r:
        kernel = next(s["kernel"]["id"] for s in json.load(r) if s["path"].endswith(path))
    req = urllib.request.Request(f"{lab}/api/kernels/{kernel}?token={TOKEN}", method="DELETE")
    urllib.request.urlopen(req, timeout=30).close()


def test_hover_says_when_the_kernel_does_not_answer(lab, page):
    """A row not sent, hovered once the kernel is gone: "asking the kernel…", then, after
    ASK_PATIENCE_MS (5 s) with no answer, that none came -- not "asking" for ever."""
    from playwright.sync_api import expect

    pg = page
    pg.set_viewport_size({"width": 1400, "height": 1800})
    open_notebook(pg, lab, "silent.ipynb")
    run_all(pg)
    explorers = pg.locator(".jp-OutputArea-output .tvz-explorer")
    expect(explorers.nth(1).locator(".tvz-cmp-summary")).to_contain_text("matched", timeout=180_000)
    zoomed = explorers.nth(1)
    tip = zoomed.locator(".tvz-cv > .tvz-tip")
    _hover_bar(pg, zoomed, "s.2999")  # the kernel is there: it answers
    expect(tip).to_contain_text("in b: s.2999\nno change\n")
    _shut_down_kernel_of(lab, "silent.ipynb")
    _hover_bar(pg, zoomed, "s.3001")
    expect(tip).to_contain_text("in b: asking the kernel…")
    expect(tip).to_contain_text(
        "in b: no answer from the kernel (busy, or not running: a saved page holds only the rows it was sent)",
        timeout=15_000,
    )
    pg.screenshot(path=str(SHOTS / "compare_lane_no_kernel.png"))
    assert not pg.errors, pg.errors


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
@pytest.mark.parametrize("width", [1024, 1400])
def test_compare_with_a_path_typed(lab, page, theme, width):
    """The "compare with…" row: a path typed and Enter draws the compare rows; a file that is not
    safetensors says why (escaped) and keeps them; the dropdown compares with a named choice."""
    from playwright.sync_api import expect

    set_theme(lab, theme)
    pg = page
    pg.set_viewport_size({"width": width, "height": 1600})
    open_notebook(pg, lab, "pick.ipynb")
    run_all(pg)
    ex = pg.locator(".jp-OutputArea-output .tvz-explorer").first
    path = ex.locator(".tvz-compare-path input")
    expect(path).to_be_visible(timeout=180_000)
    pg.wait_for_function(f"document.body.dataset.jpThemeName === {json.dumps(theme)}")
    expect(ex.locator(".tvz-cmp")).to_be_hidden()
    path.fill("b.safetensors")
    path.press("Enter")
    summary = "3 tensors in a, 4 in b, 3 matched · only in b 1, tie lost 2, dtype 1 · differ"
    expect(ex.locator(".tvz-cmp-summary")).to_have_text(summary)
    note = ex.locator(".tvz-compare-note")
    expect(note).to_have_text("comparing with b.safetensors")
    expect(ex.locator(".tvz-cmp-foot")).to_contain_text("rows 1–4 of 4")
    _hover(pg, ex, "head.weight")
    expect(ex.locator(".tvz-cv > .tvz-tip")).to_contain_text("dtype   float32                  ≠ float16")
    pg.mouse.move(5, 5)
    ex.screenshot(path=str(SHOTS / f"compare_with_{_stem(theme)}_{width}.png"))
    ex.locator(".tvz-mv canvas").scroll_into_view_if_needed()  # the model map's tensor cells say b's side too
    cell = ex.locator(".tvz-mv").evaluate("el => el.tvz.cell('head.weight')")
    pg.mouse.move(cell["x"], cell["y"])
    expect(ex.locator(".tvz-mv-tip")).to_contain_text("in b: head.weight · ≢ tie lost · Δ dtype")
    ex.locator(".tvz-mv").screenshot(path=str(SHOTS / f"compare_with_map_{_stem(theme)}_{width}.png"))
    pg.mouse.move(5, 5)
    path.fill("bad<b>.safetensors")
    path.press("Enter")
    expect(note).to_have_text(
        "⚠ could not compare with bad<b>.safetensors: bad<b>.safetensors: its first 8 bytes are not a "
        "safetensors header length (they claim more bytes than the 100000000-byte limit safetensors enforces); "
        "the file is 8 bytes, truncated, corrupt or not safetensors"
    )
    assert note.locator("b").count() == 0  # the name's markup is text
    expect(ex.locator(".tvz-cmp-summary")).to_have_text(summary)  # the comparison shown stays
    ex.locator(".tvz-compare").screenshot(path=str(SHOTS / f"compare_with_error_{_stem(theme)}_{width}.png"))
    ex.locator(".tvz-compare select").select_option("wrapped")
    expect(ex.locator(".tvz-cmp-summary")).to_have_text(
        "3 tensors in a, 3 in b, 3 matched (3 by rule) · no field, tie or sharing changed · differ"
    )
    ex.get_by_role("button", name="stop comparing").click()
    expect(ex.locator(".tvz-cmp")).to_be_hidden()
    assert not pg.errors, pg.errors
    if theme != "JupyterLab Light":
        set_theme(lab, "JupyterLab Light")


def test_compare_70b_meta_vs_itself_with_one_layer_in_bf16(lab, page):
    from playwright.sync_api import expect

    set_theme(lab, "JupyterLab Light")
    pg, ex = _open(page, lab, "llama", 1400, 1800)
    expect(ex.locator(".tvz-cmp-summary")).to_have_text(
        "725 tensors in a, 723 in b, 723 matched · only in a 2, dtype 9 · differ"
    )
    printed = pg.locator(".jp-OutputArea-output pre", has_text='"payload_bytes"').first.inner_text()
    facts = json.loads(next(line for line in printed.splitlines() if '"payload_bytes"' in line))
    assert facts["payload_bytes"] < 400_000, facts  # every row, bounded
    # it opens at the first change (layer 40 starts at row 362 of 725), n jumps to the next one
    expect(ex.locator(".tvz-cmp-foot")).to_contain_text("rows 360–373 of 725")  # two rows above it
    ex.locator(".tvz-cmp canvas").focus()
    pg.keyboard.press("n")
    tip = ex.locator(".tvz-cv > .tvz-tip")
    expect(tip).to_contain_text("a: model.layers.40.self_attn.q_proj.weight")
    assert ex.locator(".tvz-cmp").evaluate("el => el.dataset.cursor") == "361"
    pg.keyboard.press("n")
    expect(tip).to_contain_text("a: model.layers.40.self_attn.k_proj.weight")
    t = pg.evaluate("() => performance.now()")
    _hover(pg, ex, "model.layers.40.mlp.down_proj.weight")
    expect(tip).to_contain_text("dtype   float32                  ≠ bfloat16")
    expect(tip).to_contain_text("bytes   a: 896 MiB (939,524,096 B)")
    facts["hover_ms"] = pg.evaluate("() => performance.now()") - t
    pg.screenshot(
        path=str(SHOTS / "compare_70b_1400.png")
    )  # the viewport: scrolling to an element moves the hover away
    (SHOTS / "compare_70b.json").write_text(json.dumps(facts, indent=1))
    assert not pg.errors, pg.errors
