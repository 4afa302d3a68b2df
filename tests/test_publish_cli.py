"""Unit tests of ``builders.publish`` that need no Hub (the Hub flow is in tests/hub_contract, its own process)."""

from __future__ import annotations

import pytest

from builders import publish
from builders.publish import PublishError


@pytest.mark.parametrize("v, want", [("v0.0.0", (0, 0, 0)), ("v1.2.3", (1, 2, 3)), ("v10.0.12", (10, 0, 12))])
def test_semantic_versions(v, want):
    assert publish.parse_version(v) == want


@pytest.mark.parametrize("v", ["1.2.3", "v1.2", "v1.2.3.4", "v01.2.3", "v1.2.3-rc1", "V1.2.3", " v1.2.3", ""])
def test_non_semantic_versions_are_refused(v):
    with pytest.raises(PublishError, match="not semantic"):
        publish.parse_version(v)


@pytest.mark.parametrize("repo", ["acme/sieve_swap", "a/b", "Org-1/name.v2", "x_y/z-9"])
def test_repo_ids(repo):
    assert publish.check_repo_id(repo) == repo


@pytest.mark.parametrize("repo", ["sieve_swap", "acme/", "/x", "a/b/c", "a b/c", "a/b!", "-a/b", "a/b-", "a--b/c",
                                  "a/b..c", "a/" + "x" * 97])
def test_illegal_repo_ids_are_refused(repo):
    with pytest.raises(PublishError, match="repo id"):
        publish.check_repo_id(repo)


def test_previous_version_is_the_highest_semantic_tag_below():
    tags = ["v1.0.0", "v1.10.0", "v1.2.0", "v2.0.0", "nightly", "v1.2.0-rc1"]
    assert publish.previous_version(tags, "v1.3.0") == "v1.2.0"
    assert publish.previous_version(tags, "v1.11.0") == "v1.10.0"
    assert publish.previous_version(tags, "v1.0.0") is None
    assert publish.previous_version(tags, "v3.0.0") == "v2.0.0"


def test_redaction():
    msg = "401 for Bearer hf_AbCdEf123456 and token=mysecret"
    assert publish.redact(msg, "mysecret") == "401 for Bearer hf_*** and token=***"


def test_release_notes_compare_row_counts_with_the_previous_version():
    layout = publish.Layout(features={}, splits={"steps": ["train", "test"]},
                            rows={"steps": {"train": 7, "test": 2}}, default="steps")
    notes = publish.release_notes("acme/toy", "v1.1.0", "v1.0.0", layout,
                                  {"steps": {"train": 5, "test": 2}, "narrations": {"train": 3}})
    assert notes.startswith(publish.NOTES_START) and notes.rstrip().endswith(publish.NOTES_END)
    assert "previous version: `v1.0.0`" in notes and "configs removed: narrations" in notes
    assert "| steps | train | 5 | 7 | +2 |" in notes and "| narrations | train | 3 | – | – |" in notes
    first = publish.release_notes("acme/toy", "v1.0.0", None, layout, None)
    assert "none (first release)" in first and "| steps | train | 7 |" in first
    assert publish.strip_notes("# T\n\nbody\n\n" + notes) == "# T\n\nbody\n\n"


def test_upload_files_leave_out_hidden_lock_and_tmp_files(tmp_path):
    for rel in ["README.md", "steps/train-00000-of-00001.parquet", ".cache/x", "steps/.train.tmp", "a.lock",
                "b.tmp", "models/LICENSE", "models/model.json"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert publish.upload_files(tmp_path) == ["README.md", "models/model.json", "steps/train-00000-of-00001.parquet"]


def test_help_is_plain_text(capsys):
    """``--help`` prints no reST markup (the module docstring is reST; the description is plain)."""
    import pytest as _pytest

    from builders import publish

    with _pytest.raises(SystemExit) as exit_info:
        publish.main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and "``" not in out and "Publish a built release folder" in out


# ------------------------------------------------------------------------------------ ids, timeouts, deadline
# (issue 20: nothing wrong published, nothing hangs; docs/publishing.md, "Timeouts and the deadline")

import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("v", ["v1.0.0\n", "v1.0.0\r\n", "v1.0.0 ", "\nv1.0.0"])
def test_a_version_with_a_trailing_newline_is_refused(v):
    """``$`` matches before a final newline; ids and versions are matched with ``fullmatch``."""
    with pytest.raises(PublishError, match="not semantic"):
        publish.parse_version(v)
    assert publish.previous_version([v, "v0.9.0"], "v1.1.0") == "v0.9.0"


@pytest.mark.parametrize("repo", ["acme/toy\n", "acme/toy\r\n", "\nacme/toy"])
def test_a_repo_id_with_a_newline_is_refused(repo):
    with pytest.raises(PublishError, match="repo id"):
        publish.check_repo_id(repo)


def test_cli_refuses_a_version_ending_in_a_newline(tmp_path, capsys):
    rc = publish.main([str(tmp_path), "--repo", "acme/toy", "--version", "v1.0.0\n"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: version 'v1.0.0\\n' is not semantic")


@pytest.mark.parametrize("flag, value", [("--timeout", "0"), ("--deadline", "-1"), ("--deadline", "nan"),
                                         ("--timeout", "inf")])
def test_bad_timeouts_are_refused(tmp_path, capsys, flag, value):
    rc = publish.main([str(tmp_path), "--repo", "acme/toy", "--version", "v1.0.0", flag, value])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{flag} must be a positive number of seconds" in err


def test_help_documents_the_timeout_and_the_deadline(capsys):
    with pytest.raises(SystemExit):
        publish.main(["--help"])
    out = capsys.readouterr().out
    assert "--timeout SECONDS" in out and "--deadline SECONDS" in out and "default 60" in out


class _Dropped(ConnectionError):
    pass


def test_retries_print_attempt_and_wait(monkeypatch):
    """Each retry says which attempt failed, of how many, and how long it waits."""
    sleeps: list[float] = []
    monkeypatch.setattr(publish.retry, "_sleep", sleeps.append)
    monkeypatch.setattr(publish.retry, "MAX_TRIES", 3)
    calls, lines = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise _Dropped("reset by peer")
        return "ok"

    assert publish.with_retry("create_repo", flaky, log=lines.append, limit=publish.Deadline(3600)) == "ok"
    assert len(sleeps) == 2 and len(lines) == 2
    assert "create_repo: connection error, retrying in" in lines[0] and "(attempt 1/3 failed;" in lines[0]
    assert "(attempt 2/3 failed;" in lines[1] and "left of the deadline" in lines[1]


def test_a_retry_that_would_pass_the_deadline_is_not_made(monkeypatch):
    monkeypatch.setattr(publish.retry, "_sleep", lambda s: pytest.fail("slept past the deadline"))

    def dropped():
        raise _Dropped("reset by peer")

    with pytest.raises(PublishError, match=r"attempt 1/\d+, and the next attempt .* would pass the deadline of 1 s"):
        publish.with_retry("upload_folder", dropped, log=lambda m: None, limit=publish.Deadline(1))


def test_offline_refusals_are_never_retried(monkeypatch):
    from huggingface_hub.errors import OfflineModeIsEnabled

    monkeypatch.setattr(publish.retry, "_sleep", lambda s: pytest.fail("retried an offline refusal"))

    def offline():
        raise OfflineModeIsEnabled("Cannot reach https://huggingface.co: offline mode is enabled")

    with pytest.raises(PublishError, match="HF_HUB_OFFLINE is set"):
        publish.with_retry("create_repo", offline, log=lambda m: pytest.fail(m))


def _release(tmp_path: Path) -> Path:
    """A tiny release folder that passes the gate (the hub contract suite's writer), made in a subprocess so that this
    process does not import ``datasets`` before the subprocesses below set their Hub variables."""
    code = ("import sys; sys.path.insert(0, {t!r}); from hub_contract.releases import make_release; "
            "make_release(__import__('pathlib').Path({r!r}))").format(t=str(REPO_ROOT / "tests"),
                                                                     r=str(tmp_path / "toy"))
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True, timeout=120, capture_output=True)
    return tmp_path / "toy"


def _publish_cli(args: list[str], env: dict[str, str], timeout: float = 120) -> tuple[subprocess.CompletedProcess,
                                                                                         float]:
    env = {**os.environ, "HF_TOKEN": "hf_fakefakefake", "HF_HUB_DISABLE_XET": "1", "HF_HOME": env.pop("HF_HOME"),
           "HF_HUB_DISABLE_TELEMETRY": "1", **env}

    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "builders.publish", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    return done, time.monotonic() - t0


class _SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers (nor closes it)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for c in self.accepted:
            c.close()
        self.sock.close()


def test_a_hub_that_never_answers_ends_within_the_deadline(tmp_path):
    """``HF_ENDPOINT`` is a server that accepts and never answers: the publish ends with exit 2 within its deadline,
    one ``error:`` line and no traceback; the retries are announced on stdout."""
    rel = _release(tmp_path)
    server = _SilentServer()
    try:
        done, took = _publish_cli([str(rel), "--repo", "acme/toy", "--version", "v1.0.0", "--timeout", "2",
                                   "--deadline", "10"],
                                  {"HF_ENDPOINT": f"http://127.0.0.1:{server.port}", "HF_HOME": str(tmp_path / "hf"),
                                   "HF_HUB_OFFLINE": "0"}, timeout=60)
    finally:
        server.close()
    assert done.returncode == 2, done.stderr[-2000:]
    assert took < 30, took
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "deadline of 10 s" in lines[0] or "no answer within 2 s" in lines[0], lines[0]
    assert server.accepted, "the publish never connected to HF_ENDPOINT"
    assert "attempt 1/" in done.stdout, done.stdout
    assert not list(tmp_path.glob(".toy.publish-*"))  # the upload stage is gone


def test_offline_mode_is_one_line_and_exit_2_without_retries(tmp_path):
    rel = _release(tmp_path)
    done, took = _publish_cli([str(rel), "--repo", "acme/toy", "--version", "v1.0.0"],
                              {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: HF_HUB_OFFLINE is set: publishing needs the network; unset HF_HUB_OFFLINE (use --dry-run to check "
        "the folder offline)"]
    assert "retrying" not in done.stdout and took < 60
