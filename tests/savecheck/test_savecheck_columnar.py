"""The save check's column paths (numpy over the layout's table, one answer per storage) against
the per-name answers they replace, on random views of a few buffers."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.savecheck import fixes, standin
from tensorviz.savecheck import misfires as mf

# A view: (buffer, start, length, step) over one of three 1-D buffers of 48 floats, or a whole one.
_VIEW = st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 12), st.integers(1, 3)) | st.tuples(
    st.integers(0, 2), st.just(0), st.just(48), st.just(1)
)


def _state_dict(views: list[tuple[int, int, int, int]]) -> dict[str, torch.Tensor]:
    bufs = [torch.zeros(48) for _ in range(3)]
    return {f"v{i}": bufs[b][start : start + length * step : step] for i, (b, start, length, step) in enumerate(views)}


def _per_name_order(order: dict[str, int], group) -> tuple[str, ...]:
    """The per-name answer: the known names of ``group``, sorted by place."""
    return tuple(sorted((n for n in group if n in order), key=order.__getitem__))


@settings(max_examples=200, deadline=None)
@given(st.lists(_VIEW, min_size=1, max_size=12), st.data())
def test_places_and_storage_count_agree_with_the_per_name_answers(views, data):
    layout = tv.analyze(_state_dict(views))
    order = {n: i for i, n in enumerate(layout.names)}
    group = set(data.draw(st.lists(st.sampled_from([*layout.names, "unknown", "v99"]), max_size=14)))
    at = mf._places(order, group)
    names = mf._named(layout, at)
    assert names == _per_name_order(order, group)
    assert len(np.unique(layout.view_spans().storage[at])) == len({layout[n].storage for n in names})


@settings(max_examples=200, deadline=None)
@given(st.lists(_VIEW, min_size=1, max_size=12), st.data())
def test_any_shared_agrees_with_a_layout_of_just_those_names(views, data):
    layout = tv.analyze(_state_dict(views))
    for storage in layout.storages:
        every = tuple(storage.names)
        some = tuple(n for n in every if data.draw(st.booleans()))
        for names in (every, some):
            if not names:
                continue
            want = len(mf.sub_layout(layout, names).shared("overlap")) > 0
            assert mf._any_shared(layout, names, storage) == want, (names, views)


def test_refusal_misfire_names_the_chain_and_says_it_shares_bytes():
    """An overlap chain (view i reads floats [4i, 4i + 8)): save_model refuses the one group, and
    the misfire, found from the layout's own overlap groups, says they share bytes."""
    buf = torch.zeros(4 * 6 + 4)
    sd = {f"p{i}": buf[4 * i : 4 * i + 8] for i in range(6)}
    v = tv.save_check(sd)["safetensors.save_model"]
    assert v.outcome == "raises"
    [m] = [m for m in v.misfires if m.library.startswith("save_model finds no name")]
    assert m.names == tuple(sd)
    assert m.tensorviz == (
        "they share bytes; p0 reads 32 of its storage's 112 B; p1 reads 32 of its storage's 112 B; "
        "p2 reads 32 of its storage's 112 B; p3 reads 32 of its storage's 112 B"
    )


_NAME = st.lists(
    st.sampled_from(["a", "b", "'", '"', "\\", "\n", "\r", "\x0b", "\u2028", " ", "#", "\nfrom x import save"])
    | st.sampled_from(["\nsave(fixed, path)", "\ndel fixed['z']", "\nfixed['a'] = fixed['a'].clone()"]),
    max_size=4,
).map("".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_NAME, _VIEW), min_size=1, max_size=6, unique_by=lambda nv: nv[0]))
def test_fix_titles_read_once_per_plan_agree_with_reading_the_whole_code(named):
    """The title of each saver's fix comes from the plan's lines read once; it is the title read
    from that saver's whole code, whatever the names (quotes, line breaks, code-like names)."""
    sd = _state_dict([view for _, view in named])
    sd = {name: sd[f"v{i}"] for i, (name, _) in enumerate(named)}
    seen = 0
    for verdict in tv.save_check(sd):
        for fix in verdict.fixes:
            if fix.save_code.startswith("import torch"):  # a plan's code (not "use save_model")
                assert fix.title == fixes.fix_title(fix.save_code)
                seen += 1
    assert seen or all(not v.fixes for v in tv.save_check(sd))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), max_size=3),
    st.integers(0, 5),
    st.sampled_from([torch.float32, torch.bfloat16, torch.int8, torch.bool, torch.complex64]),
    st.booleans(),
)
def test_stand_ins_filled_in_directly_equal_those_made_by_init(dims, offset, dtype, parameter):
    """from_tensor fills a stand-in's slots from the tensor's own answers, as StandIn() would."""
    shape, stride = tuple(d[0] for d in dims), tuple(d[1] for d in dims)
    t = torch.zeros(200, dtype=dtype).as_strided(shape, stride, offset)
    if parameter:
        t = torch.nn.Parameter(t, requires_grad=False)
    got = standin.from_tensor("t", t, {})
    want = standin.StandIn(t.dtype, t.device, t.shape, t.stride(), int(t.storage_offset()), got._storage, "t")
    slots = standin.StandIn.__slots__
    assert [getattr(got, k) for k in slots] == [getattr(want, k) for k in slots]
    assert [type(getattr(got, k)) for k in slots] == [type(getattr(want, k)) for k in slots]
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    assert got.reach_nbytes() == (0 if t.numel() == 0 else (last + 1) * t.element_size())


def _per_record_plan(layout, names, contiguous, mode):
    """plan_lines as it read one record per name (the oracle for the column path)."""
    save, load, dup, members = [], [], 0, {}
    for v in map(layout.__getitem__, names):
        members.setdefault(v.storage, []).append(v)
    for key, views in members.items():
        st = layout.storage(key)
        if mode == "torch":
            fixes._torch_steps(st, views, contiguous, save, load)
            continue
        keep = next(
            (
                v
                for v in views
                if v.name in st.complete_names and contiguous.get(v.name, v.is_contiguous) and v.nbytes == st.nbytes
            ),
            None,
        )
        if keep is not None and len(views) > 1:
            for v in views:
                if v.name == keep.name:
                    continue
                if mode == "clone":
                    save.append(fixes._clone_line(v, contiguous, f"shares {keep.name}'s storage: its own copy"))
                else:
                    why = fixes._why_drop(layout, v, keep)
                    save.append(f"del fixed[{v.name!r}]  # {why}: rebuilt after loading")
                    load.append(f"state_dict[{v.name!r}] = {fixes._restore(v, keep)}")
        elif keep is None:
            if mode == "clone" and len(views) == 1:
                continue
            group = [v.name for v in views]
            every = st.exact and len(group) == len(st.names) and set(group) == set(st.names)
            union = st.covered_nbytes if every else layout.union_nbytes(group)
            dup += sum(v.footprint_nbytes for v in views) - union
            for v in views:
                fixes._copy_steps(v, st.nbytes, contiguous, save, load)
    return save, load, f"the copies overlap: {fixes.format_bytes(dup)} written twice" if dup else ""


_SHAPED = st.sampled_from(["flat", "expand", "t", "bytes", "double"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_VIEW, _SHAPED), min_size=1, max_size=10), st.data())
def test_plan_lines_from_columns_agree_with_the_per_record_plan(views, data):
    sd = _state_dict([view for view, _ in views])
    for i, (_, how) in enumerate(views):  # expanded, transposed, reinterpreted and wide views too
        t = sd[f"v{i}"]
        if how == "expand" and t.numel():
            sd[f"v{i}"] = t[:1].expand(3, 1)
        elif how == "t" and t.numel() >= 4:
            sd[f"v{i}"] = t[: t.numel() // 2 * 2].view(2, -1).t()
        elif how == "bytes" and t.is_contiguous() and t.stride() == (1,):
            sd[f"v{i}"] = t.view(torch.uint8)
        elif how == "double" and t.stride() == (1,) and t.numel() % 2 == 0 and t.storage_offset() % 2 == 0:
            sd[f"v{i}"] = t.view(torch.float64)
    layout = tv.analyze(sd)
    every = list(layout.names)
    names = data.draw(st.sampled_from([every, every[::-1], every[::2]]))
    contiguous = {n: sd[n].is_contiguous() for n in names if data.draw(st.booleans())}
    for mode in ("single", "clone", "torch"):
        assert fixes.plan_lines(layout, names, contiguous, mode) == _per_record_plan(layout, names, contiguous, mode)


def _whole_first_sentence(message: str) -> str:
    first = " ".join(message.split()).split(". ")[0].rstrip(".")
    return first[:139] + "…" if len(first) > 140 else first


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "bc", ".", ". ", " ", "\n", "\t", ".\n", "..", "x" * 30]), max_size=60), st.data()
)
def test_first_sentence_from_a_prefix_is_that_of_the_whole_message(parts, data):
    message = "".join(parts)
    head = data.draw(st.integers(1, 400))
    assert fixes._first_sentence(message, head) == _whole_first_sentence(message)


def test_first_sentence_of_dots_past_the_prefix():
    for message in (
        "a" * 100 + "." * 300 + " b",
        "a" * 200 + ". b",
        "a" * 100 + ". b" + "c" * 500,
        " \n" * 300 + "x. y",
    ):
        for head in (50, 120, 150, 250):
            assert fixes._first_sentence(message, head) == _whole_first_sentence(message)


_LINE = st.lists(st.sampled_from(["a", "\n", "\r", " ", "del fixed['x']", "_view_of(", ""]), max_size=4).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_LINE, min_size=1, max_size=5),
    st.lists(_LINE, max_size=3),
    st.sampled_from(["safetensors.save_file", "safetensors.save_model", "torch.save", "transformers.save_pretrained"]),
    st.sampled_from(["module", "mapping"]),
)
def test_fix_code_from_a_plan_text_made_once_is_the_code_made_whole(save_lines, load_lines, saver, kind):
    """A plan's lines are joined once; each saver's code is then what joining and tidying it
    whole gave (empty lines folded, wherever they are)."""
    from types import SimpleNamespace

    fix = fixes._plan_fix(
        SimpleNamespace(saver=saver), SimpleNamespace(kind=kind), "p", "", fixes._plan_text(save_lines, load_lines)
    )
    imports, call = fixes._SAVE[saver]
    base = "model.state_dict()" if kind == "module" else "state_dict"
    save = fixes._tidy("\n".join(["import torch", imports, "", f"fixed = dict({base})", *save_lines, call]))
    helper = any("_view_of(" in line for line in load_lines)
    load = "\n".join(
        [
            "import torch",
            fixes._LOAD.get(saver, fixes._LOAD_SAFETENSORS),
            *([fixes._HELPER] if helper else []),
            *load_lines,
        ]
    )
    if kind == "module" and saver != "transformers.save_pretrained":
        load += "\nmodel.load_state_dict(state_dict)"
    assert (fix.save_code, fix.load_code, fix.title) == (save, load, fixes.fix_title(save))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), max_size=3),
    st.integers(0, 5),
    st.lists(st.sampled_from([-1, 0, 1, -2, 5, -1.0]), max_size=4),
)
def test_stand_in_flat_view_and_last_element_answer_alike_on_every_call(dims, offset, indices):
    """view(-1) and [-1] are answered from the first call's stand-in afterwards (safetensors asks
    for them in every helper call): each call still answers as torch does, or raises as it does."""
    shape, stride = tuple(d[0] for d in dims), tuple(d[1] for d in dims)
    t = torch.zeros(200).as_strided(shape, stride, offset)
    s = standin.from_tensor("t", t, {})
    for _ in range(3):
        for args in ((-1,), ((-1,),), (t.numel(),)):
            try:
                flat = t.view(*args)
            except RuntimeError:
                try:
                    s.view(*args)
                except RuntimeError:
                    continue
                raise AssertionError(f"view{args} did not raise") from None
            got = s.view(*args)
            assert (tuple(got.shape), got.stride(), got.storage_offset()) == (
                tuple(flat.shape),
                flat.stride(),
                flat.storage_offset(),
            )
            for index in indices:
                try:
                    one = flat[index]
                except (IndexError, TypeError) as err:
                    try:
                        got[index]
                    except type(err):
                        continue
                    raise AssertionError(f"[{index!r}] did not raise") from None
                item = got[index]
                assert (tuple(item.shape), item.storage_offset(), item.data_ptr()) == (
                    tuple(one.shape),
                    one.storage_offset(),
                    one.data_ptr(),
                )


@settings(max_examples=150, deadline=None)
@given(st.lists(_VIEW, min_size=2, max_size=10), st.data())
def test_missed_pairs_with_one_library_group_agree_with_the_per_name_reading(views, data):
    """With one library group, an overlap group inside it is settled by one superset test; the
    pairs it misses are those read name by name (a group given as a tuple takes that path)."""
    from tensorviz.savecheck.savers.common import Run

    layout = tv.analyze(_state_dict(views))
    names = list(layout.names)
    group = [n for n in names if data.draw(st.booleans())] if data.draw(st.booleans()) else names
    fast = mf._missed(Run(tuple(names), anchor=[frozenset(group)]), layout, "check", {})
    slow = mf._missed(Run(tuple(names), anchor=[tuple(group)]), layout, "check", {})  # type: ignore[list-item]
    assert fast == slow
