"""The one gloo teardown abort the spawned-rank runs accept, and only after every rank is done."""

from __future__ import annotations

from tests.helpers.dist_runs import _torn_down_after_done

ABORT = "terminate called without an active exception\n"


def test_accepted_only_when_every_rank_wrote_its_marker(tmp_path) -> None:
    out = str(tmp_path)
    (tmp_path / "done.load4.rank0").touch()
    (tmp_path / "done.load4.rank1").touch()
    (tmp_path / "done.load4.rank2").touch()
    assert not _torn_down_after_done(ABORT, out, 4, "done.load4")  # rank 3 never finished
    (tmp_path / "done.load4.rank3").touch()
    assert _torn_down_after_done(ABORT, out, 4, "done.load4")
    assert not _torn_down_after_done(ABORT, out, 4, "done.save4")  # another run's markers do not count


def test_any_other_failure_still_fails(tmp_path) -> None:
    for rank in range(2):
        (tmp_path / f"done.rank{rank}").touch()
    assert not _torn_down_after_done("AssertionError: rank 1 got 3.0\n", str(tmp_path), 2, "done")
    assert _torn_down_after_done("Traceback ...\n" + ABORT, str(tmp_path), 2, "done")
