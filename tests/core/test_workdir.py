"""The work directory: ``--fresh`` only deletes what the toolkit made; a lock keeps two builds apart."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from builders.core import workdir


def test_fresh_refuses_a_folder_the_toolkit_did_not_make(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    workdir.prepare(tmp_path, "sieve_swap")  # not empty: not marked
    with pytest.raises(workdir.WorkDirError, match="not a work directory made by this toolkit"):
        workdir.fresh(tmp_path, protect=[])
    assert (tmp_path / "thesis.tex").read_text() == "years of work"


def test_fresh_empties_a_marked_work_dir_but_keeps_marker_and_lock(tmp_path):
    wd = tmp_path / ".work" / "marc"
    workdir.prepare(wd, "marc")
    (wd / "text").mkdir()
    (wd / "text" / "part-00000.parquet").write_text("x")
    with workdir.WorkDirLock(wd):
        workdir.fresh(wd, protect=[tmp_path / "marc"])
    assert sorted(p.name for p in wd.iterdir()) == [workdir.LOCK, workdir.MARKER]


def test_fresh_never_deletes_the_current_directory_or_the_release(tmp_path):
    workdir.prepare(tmp_path, "sieve_swap")  # an empty folder gets marked...
    assert (tmp_path / workdir.MARKER).is_file()
    with pytest.raises(workdir.WorkDirError, match="it contains"):  # ...but it holds the release / the CWD
        workdir.fresh(tmp_path, protect=[tmp_path / "sieve_swap"])


def test_a_second_build_on_the_same_work_dir_exits_with_a_clear_message(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from builders.core.workdir import WorkDirLock
        with WorkDirLock({str(tmp_path)!r}):
            print("locked", flush=True)
            time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(workdir.WorkDirError, match=rf"another build is using .*pid {holder.pid}.*--wait"):
            with workdir.WorkDirLock(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    with workdir.WorkDirLock(tmp_path, wait=True, poll_s=0.05):  # free again once the holder is gone
        pass
