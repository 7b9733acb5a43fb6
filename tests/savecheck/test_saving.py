"""Unit tests of the save check: stand-ins, headers, misfires, ties, guards, rendering, purity."""

from __future__ import annotations

import collections
import gc
import json
import os
import struct
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file, save_model
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import tensorviz as tv
from tensorviz.savecheck import standin as _standin
from tensorviz.savecheck.report import OUTCOMES, SAVERS, SaveReport
from tensorviz.savecheck.savers import common as _savers
from tests.helpers.models import FusedQKV, QVOnly, TiedLM, meta_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


# -- stand-ins answer like the tensors they stand for ------------------------------------------------
def _cases() -> dict[str, torch.Tensor]:
    w = torch.randn(4, 6)
    return {
        "w": w,
        "wt": w.t(),
        "row": w[1],
        "col": w[:, 2],
        "empty": w[2:2],
        "u8": w.view(torch.uint8),
        "expand": w[0, :3].expand(5, 3),
        "meta": torch.empty(3, 4, device="meta")[1:],
        "scalar": w[1, 1],
        "bf16": torch.zeros(8, dtype=torch.bfloat16)[2:],
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_stand_in_metadata_matches_the_tensor(name):
    t = _cases()[name]
    s = _standin.from_tensor(name, t, {})
    assert isinstance(s, torch.Tensor)  # deliberately, so the savers' type checks accept it
    assert s.data_ptr() == t.data_ptr()
    assert s.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert s.untyped_storage().nbytes() == t.untyped_storage().nbytes()
    assert (tuple(s.shape), s.stride(), s.storage_offset(), s.dtype) == (
        tuple(t.shape),
        t.stride(),
        t.storage_offset(),
        t.dtype,
    )
    assert (s.nelement(), s.element_size(), s.is_contiguous()) == (t.nelement(), t.element_size(), t.is_contiguous())
    try:
        flat = t.view(-1)
    except RuntimeError as err:
        with pytest.raises(RuntimeError) as info:
            s.view(-1)
        assert str(info.value) == str(err)
    else:
        if t.numel():
            assert s.view(-1)[-1].data_ptr() == flat[-1].data_ptr()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), min_size=0, max_size=3),
    st.integers(0, 5),
    st.integers(-6, 6),
)
def test_stand_in_flatten_and_index_answer_as_torch(dims, offset, index):
    """view(-1) and x[i] on a 1-D view (safetensors' _end_ptr) answer without a meta twin where
    they can: same shape, stride, offset and address as torch's own, the same error otherwise."""
    shape, stride = tuple(d[0] for d in dims), tuple(d[1] for d in dims)
    t = torch.zeros(200)[offset:].as_strided(shape, stride, offset)
    s = _standin.from_tensor("t", t, {})
    for real, fake in ((lambda: t.view(-1), lambda: s.view(-1)), (lambda: t.view((-1,)), lambda: s.view((-1,)))):
        try:
            flat = real()
        except RuntimeError as err:
            with pytest.raises(RuntimeError) as info:
                fake()
            assert str(info.value) == str(err)
            continue
        got = fake()
        assert (tuple(got.shape), got.stride(), got.storage_offset()) == (
            tuple(flat.shape),
            flat.stride(),
            flat.storage_offset(),
        )
        try:
            one = flat[index]
        except IndexError as err:
            with pytest.raises(IndexError) as info:
                got[index]
            assert str(info.value) == str(err)
            continue
        item = got[index]
        assert (tuple(item.shape), item.stride(), item.storage_offset(), item.data_ptr()) == (
            (),
            (),
            one.storage_offset(),
            one.data_ptr(),
        )


def test_stand_in_copies_get_a_fresh_storage_and_never_touch_data():
    w = torch.randn(4, 6)
    s = _standin.from_tensor("wt", w.t(), {})
    c = s.contiguous()
    assert c is not s and c.is_contiguous() and c.source == "copy of wt"
    assert c.untyped_storage().nbytes() == 96 and c.untyped_storage().data_ptr() not in (0, w.data_ptr())
    assert _standin.from_tensor("w", w, {}).contiguous().source == "w"  # contiguous: itself
    with pytest.raises(RuntimeError, match="would copy tensor data"):
        s.to("cpu")


# -- safetensors file sizes, header included -----------------------------------------------------------
@pytest.mark.parametrize("metadata", [None, {}, {"format": "pt", 'é"\n': "ü"}])
def test_safetensors_file_size_is_exact(tmp_path, metadata):
    from safetensors.torch import _SIZE

    tensors = {
        f"t{i}_{str(dt)[6:]}": torch.zeros(i + 1, 3, dtype=dt)
        for i, dt in enumerate(d for d in _SIZE if d is not None and d != getattr(torch, "float4_e2m1fn_x2", 0))
    }
    tensors["empty"] = torch.zeros(0, 4)
    tensors["scalar"] = torch.tensor(1.5)
    tensors['nämé"\\\t'] = torch.zeros(3, dtype=torch.float16)
    save_file(tensors, tmp_path / "x.safetensors", metadata=metadata)
    stand = {k: _standin.from_tensor(k, v, {}) for k, v in tensors.items()}
    assert _savers.safetensors_file_nbytes(stand, metadata) == os.path.getsize(tmp_path / "x.safetensors")


def test_unknown_dtype_gives_no_file_size():
    s = {"c": _standin.from_tensor("c", torch.zeros(2, dtype=torch.complex128), {})}
    assert _savers.safetensors_file_nbytes(s, None) is None


# -- misfires: the library's reasoning against the exact bytes ------------------------------------------
def test_non_contiguous_view_misfire_names_the_view_and_the_truth():
    w = torch.randn(4, 6)
    v = tv.save_check({"w": w, "wt": w.t()})["safetensors.save_file"]
    assert v.error_type == "RuntimeError" and v.message.startswith("view size is not compatible")
    (m,) = v.misfires
    assert m.names == ("w", "wt")
    assert "impossible for non-contiguous wt" in m.library
    assert m.tensorviz == "wt same-bytes w; wt is a valid float32[6×4] stride (1, 6) view"


def test_interleaved_slices_called_shared_are_disjoint():
    x = torch.randn(12)
    v = tv.save_check({"even": x[::2], "odd": x[1::2]})["safetensors.save_file"]
    assert v.anchor == (("even", "odd"),)
    (m,) = v.misfires
    assert m.library == "_find_shared_tensors treats them as sharing memory"
    assert m.tensorviz == "no byte in common: odd disjoint even"


def test_nested_slices_missed_by_the_span_sweep(tmp_path):
    """safetensors' sweep forgets the outer tensor's end: C (inside A) looks unshared."""
    a = torch.randn(100)
    d = collections.OrderedDict(A=a, B=a[10:20], C=a[30:40])
    report = tv.save_check(d)
    sf, sm = report["safetensors.save_file"], report["safetensors.save_model"]
    assert sf.anchor == (("A", "B"),)
    missed = [m for m in sf.misfires if "does not see" in m.library]
    assert [m.names for m in missed] == [("A", "C")]
    assert missed[0].tensorviz.startswith("C within A")
    # save_model drops B (inside A) but then refuses C on its own: predicted, and true
    assert sm.error_type == "RuntimeError" and "amongst: {'C'}" in sm.message
    with pytest.raises(RuntimeError) as info:
        holder = nn.Module()
        for k, t in d.items():
            holder.register_buffer(k, t)
        save_model(holder, tmp_path / "m.safetensors")
    assert str(info.value) == sm.message


def test_meta_model_is_judged_as_if_materialised_not_at_address_0():
    """On meta tensors accelerate's id_tensor_storage sees every tensor at address 0 and would group
    the untied twins a and b; the check judges the model as if materialised (issue 13), where
    only the real tie is removed -- the same verdict as the model built on CPU."""
    from tests.helpers.models import MetaTiedPlusTwins

    meta, cpu = tv.save_check(meta_model()), tv.save_check(MetaTiedPlusTwins())
    v, c = meta["accelerate.save"], cpu["accelerate.save"]
    assert "meta tensors hold no data" in meta.notes[0]
    assert (v.outcome, v.error_type, v.kept, v.dropped) == (
        "ok",
        "",
        ("emb.weight", "a.weight", "b.weight"),
        ("head.weight",),
    )
    assert (v.kept, v.dropped, v.logs, v.misfires) == (c.kept, c.dropped, c.logs, c.misfires)
    assert v.logs == (
        "Removed shared tensor {'head.weight'} while saving. This should be OK, but "
        "check by verifying that you don't receive any warning while reloading",
    )


def test_save_model_refusal_of_an_unshared_slice_is_explained():
    v = tv.save_check(QVOnly())["safetensors.save_model"]
    m = [m for m in v.misfires if m.library.startswith("save_model finds no name")]
    assert m and m[0].tensorviz == "nothing here is shared; q.weight reads 800 of its storage's 2400 B"


# -- ties side by side -----------------------------------------------------------------------------
def test_ties_fused_views_share_storage_without_a_tie():
    t = tv.save_check(FusedQKV()).ties
    assert t.storage == (("qkv.weight", "q.weight", "v.weight"),) and t.object == () and t.declared == ()
    (g,) = t.groups
    assert (g.storage, g.object, g.declared, g.relations) == (True, False, False, ("", "within", "within"))
    assert len(t.mismatches) == 1 and "share a storage without being a tie" in t.mismatches[0]


def test_ties_parameter_tie_is_storage_and_object():
    t = tv.save_check(TiedLM()).ties
    (g,) = t.groups
    assert g.names == ("wte.weight", "lm_head.weight") and (g.storage, g.object) == (True, True)
    assert t.mismatches == () and t.object_source.startswith("accelerate.utils.find_tied_parameters")


def test_ties_same_bytes_but_two_parameter_objects():
    m = TiedLM()
    m.lm_head.weight = nn.Parameter(m.wte.weight.detach())  # same storage, a new Parameter
    t = tv.save_check(m).ties
    (g,) = t.groups
    assert (g.storage, g.object, g.relations) == (True, False, ("", "identical"))
    assert "find_tied_parameters does not see this tie" in t.mismatches[0]


@pytest.fixture(scope="module")
def gpt2():
    from tests.helpers.models import tiny_gpt2

    return tiny_gpt2


def test_ties_transformers_declared_and_real(gpt2):
    t = tv.save_check(gpt2(tied=True), savers=["torch.save"]).ties
    assert t.declared == (("lm_head.weight", "transformer.wte.weight"),)
    assert t.declared_source == "transformers all_tied_weights_keys"
    assert dict(t.config)["config.tie_word_embeddings"] is True
    assert dict(t.config)["output embeddings is input embeddings"] is True
    (g,) = t.groups
    assert (g.storage, g.object, g.declared) == (True, True, True) and t.mismatches == ()


def test_ties_transformers_declared_but_separate(gpt2):
    m = gpt2(tied=True)
    m.lm_head.weight = nn.Parameter(m.transformer.wte.weight.detach().clone())
    t = tv.save_check(m, savers=["torch.save"]).ties
    (g,) = t.groups
    assert (g.storage, g.object, g.declared) == (False, False, True)
    assert t.mismatches == (
        "{transformer.wte.weight, lm_head.weight}: declared tied but stored separately: "
        "save_pretrained writes each of them; the model no longer shares these weights",
    )


def test_ties_transformers_tied_but_not_declared(gpt2):
    m = gpt2(tied=False)
    m.lm_head.weight = m.transformer.wte.weight
    report = tv.save_check(m)
    assert report.ties.declared == ()
    assert any("tied in memory but not declared" in x for x in report.ties.mismatches)
    v = report["transformers.save_pretrained"]
    assert v.outcome == "drops data" and v.dropped == ("lm_head.weight",)


# -- guards: a changed library gives "could not evaluate", never an exception ---------------------------
def test_missing_private_helper_is_reported_not_raised(monkeypatch):
    import safetensors.torch as st

    monkeypatch.delattr(st, "_find_shared_tensors")
    report = tv.save_check(TiedLM())
    v = report["safetensors.save_file"]
    assert v.outcome == "could not evaluate"
    assert v.message == "could not evaluate: safetensors.torch._find_shared_tensors does not exist in this version"
    assert report["torch.save"].outcome == "ok"  # the others still answer


def test_changed_helper_signature_is_reported(monkeypatch):
    import accelerate.utils.modeling as modeling

    monkeypatch.setattr(modeling, "id_tensor_storage", lambda t, extra: t)
    v = tv.save_check(TiedLM())["accelerate.save"]
    assert v.outcome == "could not evaluate" and "a library helper changed (TypeError" in v.message


def test_unknown_saver_is_a_teaching_error():
    with pytest.raises(ValueError, match=r"unknown saver\(s\) \['pickle'\]; choose from"):
        tv.save_check({"w": torch.zeros(2)}, savers=["pickle"])


def test_savers_subset_and_order():
    r = tv.save_check({"w": torch.zeros(2)}, savers=["torch.save", "safetensors.save_file"])
    assert [v.saver for v in r] == ["torch.save", "safetensors.save_file"]


# -- purity: metadata only, nothing kept, nothing written -----------------------------------------------
class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: set[tuple[str, str]] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        devices = {str(a.device) for a in args if isinstance(a, torch.Tensor)}
        for d in devices:
            self.ops.add((str(func), d))
        return func(*args, **(kwargs or {}))


def test_no_tensor_data_is_touched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = FusedQKV()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with _Ops() as rec:
        tv.save_check(m)
    on_real = {op for op, dev in rec.ops if dev != "meta"}
    assert on_real <= {"aten.detach.default"}, on_real  # state_dict() detaches; nothing else
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert os.listdir(tmp_path) == []


def test_report_keeps_no_reference_to_the_module():
    m = TiedLM()
    ref = weakref.ref(m)
    report = tv.save_check(m)
    del m
    gc.collect()
    assert ref() is None and isinstance(report, SaveReport)


# -- inputs: layouts and files ----------------------------------------------------------------------
def test_safetensors_file_is_checked_as_loaded(tmp_path):
    save_model(FusedQKV(), tmp_path / "f.safetensors")
    report = tv.save_check(tmp_path / "f.safetensors")
    assert report.ok
    assert sorted(report["safetensors.save_file"].kept) == ["q.bias", "qkv.bias", "qkv.weight", "v.bias"]
    assert str(tmp_path) in report.source
    assert any("every tensor its own storage" in n for n in report.notes)


def test_torch_checkpoint_keeps_its_storage_sharing(tmp_path):
    torch.save(QVOnly().state_dict(), tmp_path / "qv.pt")
    report = tv.save_check(str(tmp_path / "qv.pt"))
    names = report["accelerate.save"].dropped
    assert len(names) == 1 and names[0].endswith("v.weight")
    assert report["torch.save"].unreferenced_nbytes == 800


# -- rendering ----------------------------------------------------------------------------------------
def test_text_html_dict_and_bundle():
    w = torch.randn(2, 3)
    report = tv.save_check({"<b>w</b>": w, "w&t": w.t()})
    text = report.to_text()
    assert text.splitlines()[0] == f"Save check of dict: {len(report)} saver(s), unique tensor bytes 24 B"
    for v in report:
        assert f"{v.saver}: " in text
    html = report.to_html()
    assert "<b>w</b>" not in html and "&lt;b&gt;w&lt;/b&gt;" in html and "w&amp;t" in html
    assert "<script" not in html and "<img" not in html and html.count("<tr>") >= len(report) + 1
    bundle = report._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"} and bundle["text/plain"] == text
    assert set(report._repr_mimebundle_(include=["text/html"])) == {"text/html"}
    d = report.to_dict()
    json.dumps(d)
    assert d["verdicts"][0]["saver"] == report.verdicts[0].saver
    assert d["versions"]["torch"] == torch.__version__
    assert set(d) == {"source", "verdicts", "versions", "unique_nbytes", "ties", "notes", "not_run"}


def test_outcome_is_worst_problem():
    report = tv.save_check(QVOnly())
    for v in report:
        assert v.outcome in OUTCOMES and v.problems == tuple(sorted(v.problems, key=OUTCOMES.index))
        assert v.outcome == (v.problems[0] if v.problems else "ok")
    assert set(v.saver for v in report) <= set(SAVERS)


def test_layout_method_and_public_function_agree():
    m = TiedLM()
    a, b = tv.save_check(m), tv.analyze(m).save_check()
    assert [v.outcome for v in a if v.saver != "Accelerator.save_model"] == [v.outcome for v in b]


def test_docstring_example_header_size_for_one_tensor(tmp_path):
    """The header sizing follows safetensors' padding to 8 bytes exactly."""
    save_file({"a": torch.zeros(3)}, tmp_path / "a.safetensors")
    raw = open(tmp_path / "a.safetensors", "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and 8 + n + 12 == len(raw)
    s = {"a": _standin.from_tensor("a", torch.zeros(3), {})}
    assert _savers.safetensors_file_nbytes(s, None) == len(raw)


@pytest.mark.parametrize(
    "module",
    ["tensorviz.savecheck.report", "tensorviz.savecheck.ties", "tensorviz.savecheck.html", "tensorviz.savecheck.fixes"],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_sparse_tensor_message_and_guard(tmp_path):
    sparse = torch.eye(3).to_sparse()
    d = collections.OrderedDict(w=torch.zeros(2), s=sparse)
    report = tv.save_check(d)
    v = report["safetensors.save_file"]
    with pytest.raises(ValueError) as info:
        save_file(dict(d), tmp_path / "s.safetensors")
    assert (v.error_type, v.message) == ("ValueError", str(info.value))
    acc = report["accelerate.save"]
    assert acc.outcome == "could not evaluate" and "'s' is not one (sparse_coo tensor: its values" in acc.message


# -- the HTML: inline styles only, escaped, one compact row per saver ----------------------------------
class _Node:
    """A parsed element: tag, attributes, children (nodes and strings)."""

    def __init__(self, tag: str, attrs: dict[str, str]):
        self.tag, self.attrs, self.children = tag, attrs, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else "\n" if c.tag == "br" else c.text() for c in self.children)

    def iter(self, tag: str | None = None):
        for c in self.children:
            if isinstance(c, _Node):
                if tag is None or c.tag == tag:
                    yield c
                yield from c.iter(tag)

    def kids(self, tag: str) -> list[_Node]:
        return [c for c in self.children if isinstance(c, _Node) and c.tag == tag]


def _parse(page: str) -> _Node:
    from html.parser import HTMLParser

    root = _Node("#root", {})
    stack = [root]

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            node = _Node(tag, dict(attrs))
            stack[-1].children.append(node)
            if tag not in ("br", "wbr"):  # void elements
                stack.append(node)

        def handle_endtag(self, tag):
            assert stack[-1].tag == tag, f"</{tag}> closes <{stack[-1].tag}>"
            stack.pop()

        def handle_data(self, data):
            stack[-1].children.append(data)

    P(convert_charrefs=True).feed(page)
    assert stack == [root], "unclosed elements"
    return root


def _decls(node: _Node) -> list[tuple[str, str]]:
    return [tuple(x.strip() for x in d.split(":", 1)) for d in node.attrs.get("style", "").split(";") if d]


def _sanitized(node: _Node) -> dict[str, str]:
    """The style JupyterLab's sanitizer leaves (untrusted notebooks): var() values are dropped."""
    return {k: v for k, v in _decls(node) if "var(" not in v}


@pytest.fixture(scope="module")
def qv_page():
    report = tv.save_check(QVOnly())
    return report, _parse(report.to_html())


def test_html_has_no_style_block_and_every_element_styles_itself(qv_page):
    report, root = qv_page
    page = report.to_html()
    assert "<style" not in page and "<script" not in page and "<img" not in page
    plain = ("b", "br", "wbr", "tr", "thead", "tbody")  # they inherit; nothing to override on them
    bare = [n.tag for n in root.iter() if n.tag not in plain and "style" not in n.attrs]
    assert bare == []
    for cell in list(root.iter("td")) + list(root.iter("th")):
        assert ("text-align", "left") in _decls(cell)  # JupyterLab right-aligns td/th otherwise
    (div,) = root.kids("div")
    assert div.attrs["class"] == "tensorviz-save-check"
    assert all(("table-layout", "auto") in _decls(t) for t in root.iter("table"))


def test_html_var_colours_have_a_plain_fallback_first(qv_page):
    _, root = qv_page
    for node in root.iter():
        decls = _decls(node)
        for i, (prop, value) in enumerate(decls):
            if "var(" in value:
                fallback = value[value.index(",") + 1 : value.rindex(")")].strip()
                assert decls[i - 1] == (prop, fallback), (node.tag, decls)


def test_html_badges_say_the_outcome_in_a_symbol_and_a_word(qv_page):
    report, root = qv_page
    table = next(root.iter("table"))
    rows = table.kids("tbody")[0].kids("tr")
    assert len(rows) == len(report)
    expect = {
        "ok": ("✓", "#388e3c"),
        "raises": ("✗", "#d32f2f"),
        "drops data": ("✗", "#d32f2f"),
        "writes unreferenced bytes": ("⚠", "#e65100"),
    }
    for v, row in zip(report, rows):
        badge = row.kids("td")[1].kids("span")[0]
        symbol, colour = expect[v.outcome]
        assert badge.text() == f"{symbol} {v.outcome}"
        assert _sanitized(badge)["color"] == colour  # survives the sanitizer
        assert ("border", "1px solid") in _decls(badge)  # a shape besides the colour


def test_html_table_is_one_compact_row_per_saver(qv_page):
    report, root = qv_page
    table = next(root.iter("table"))
    head = table.kids("thead")[0].kids("tr")[0].kids("th")
    assert [th.text() for th in head] == ["saver", "outcome", "names", "bytes"]
    cells = {
        tr.kids("td")[0].kids("b")[0].text(): [" ".join(td.text().split()) for td in tr.kids("td")]
        for tr in table.kids("tbody")[0].kids("tr")
    }
    assert cells["torch.save"][1:] == [
        "⚠ writes unreferenced bytes",
        "kept 4 of 4",
        "writes 2.4 KiB file 4.5 KiB unreferenced 800 B",
    ]
    assert cells["accelerate.save"][1:] == [
        "✗ drops data",
        "kept 3 of 4 dropped v.weight",
        "writes 880 B file 1.1 KiB lost 800 B",
    ]
    assert cells["safetensors.save_model"][1:] == ["✗ raises RuntimeError", "nothing is written", "—"]
    for v, tr in zip(report, table.kids("tbody")[0].kids("tr")):
        assert ("white-space", "nowrap") in _decls(tr.kids("td")[3])  # "2.4 KiB" never wraps
        assert len(tr.text()) < 120  # compact: the message waits in the details below
        assert not v.message or " ".join(v.message.split())[:20] not in " ".join(tr.text().split())


def test_html_details_hold_the_message_once_and_short_summaries(qv_page):
    report, root = qv_page
    blocks = root.kids("div")[0].kids("details")
    assert len(blocks) == len(report)
    for v, block in zip(report, blocks):
        summary = block.kids("summary")[0].text()
        assert summary.startswith(f"{v.saver} ") and len(summary) < 130
        body = block.kids("div")[0]
        pres = [p.text() for p in body.kids("pre")]
        if v.message:
            assert pres == [f"{v.error_type}: {v.message.strip()}"]  # exact, once
            assert v.message.strip() not in summary
        fixes = body.kids("details")
        assert [f.kids("summary")[0].text() for f in fixes] == [f"fix {i}: {f.title}" for i, f in enumerate(v.fixes, 1)]
        for f, node in zip(v.fixes, fixes):
            assert [p.text() for p in node.kids("div")[0].kids("pre")] == [f.code(), f.load_code]
    sm = blocks[1].kids("summary")[0].text()
    assert sm == (
        "safetensors.save_model ✗ raises RuntimeError: Error while trying to find names to remove "
        "to save state dict… · 1 misfire, 1 fix"
    )


def test_html_escapes_every_user_string():
    evil = "<script>alert(1)</script>"
    w = torch.randn(4, 6)
    report = tv.save_check({evil: w, "w&t": w.t(), "even": w.view(-1)[::2]})
    page = report.to_html()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    root = _parse(page)  # parses cleanly: no tag came from the data
    assert {n.tag for n in root.iter()} <= {
        "div",
        "b",
        "br",
        "wbr",
        "span",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "details",
        "summary",
        "pre",
        "code",
    }
    fix = report["safetensors.save_file"].fixes[0]
    assert evil in fix.load_code
    assert any(p.text() == fix.load_code for p in root.iter("pre"))  # shown as text, exactly


def test_fix_titles_say_what_the_code_does():
    v = tv.save_check(FusedQKV())["safetensors.save_file"]
    assert [f.title for f in v.fixes] == [
        "use save_model(model, path); load_model(model, path) restores the aliases",
        "leave out q.weight, v.weight (rebuilt after loading); then save_file",
    ]
    report = tv.save_check(QVOnly())
    assert (
        report["accelerate.save"].fixes[0].title
        == "write q.weight, v.weight as their own copies; then accelerate.utils.save"
    )
    e = tv.save_check(collections.OrderedDict(e=torch.randn(3)[:2].expand(4, 2)))["torch.save"]
    assert e.fixes[0].title == "write e un-expanded (expanded again after loading); then torch.save"


def test_accelerate_verdict_says_only_an_ordered_dict_is_deduplicated():
    w = torch.randn(3, 3)
    ordered = tv.save_check(collections.OrderedDict(a=w, b=w), savers=["accelerate.save"])["accelerate.save"]
    plain = tv.save_check({"a": w, "b": w}, savers=["accelerate.save"])["accelerate.save"]
    assert ordered.notes[0].startswith("accelerate.utils.save de-duplicates only an OrderedDict")
    assert ordered.dropped == ("b",)
    assert plain.notes[0].startswith("a plain dict: accelerate.utils.save de-duplicates only an OrderedDict")
    assert plain.outcome == "raises" and plain.message.strip().startswith("Some tensors share memory")


def test_fix_titles_read_names_with_quotes_and_escapes():
    w = torch.randn(3, 4)
    v = tv.save_check(collections.OrderedDict({"it's": w, 'a"b\tc': w.t()}))["safetensors.save_file"]
    assert [f.title for f in v.fixes] == ['leave out a"b\tc (rebuilt after loading); then save_file']


def test_fix_titles_never_call_the_ast_parser(monkeypatch):
    """ast.parse shares C state between threads in CPython 3.11 (python/cpython#106905)."""
    import ast

    def refuse(*args, **kwargs):
        raise AssertionError("ast.parse called")

    monkeypatch.setattr(ast, "parse", refuse)
    assert tv.save_check(FusedQKV())["safetensors.save_file"].fixes[1].title.startswith("leave out q.weight")


def test_save_check_leaves_no_cycle_for_the_collector():
    """The check's objects are freed as it returns, while the collector is paused: a memoised
    library error (save_file's, asked again by accelerate) kept its traceback's frames, and so
    every stand-in, alive in a cycle that the next collector pass walked (0.4-0.5 s at 100k views)."""
    buf = torch.zeros(64)
    sd = {"a": buf[:40], "b": buf[24:]}  # shared: save_file raises, accelerate's save_file again
    gc.collect()
    gc.disable()
    try:
        report = tv.save_check(sd)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage if type(o).__name__ in ("frame", "StandIn", "Layout", "Subject")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert report["safetensors.save_file"].outcome == "raises" and report["accelerate.save"].outcome == "raises"
    assert left == []


def test_save_check_pauses_the_collector_only_while_it_runs(monkeypatch):
    """No collector pass over the caller's whole heap while the check builds its stand-ins and
    records (two such passes were 0.25-0.55 s of a 9,005-tensor check); enabled again after, and
    a caller's own pause is left as it was."""
    from tensorviz.savecheck import report

    enabled, run = [], report.run_check
    monkeypatch.setattr(report, "run_check", lambda *a: enabled.append(gc.isenabled()) or run(*a))
    r = tv.save_check(TiedLM())
    assert enabled == [False] and gc.isenabled() and r["torch.save"].outcome == "ok"
    gc.disable()
    try:
        tv.save_check(TiedLM())
        assert enabled == [False, False] and not gc.isenabled()
    finally:
        gc.enable()
