"""builders.models.frame_decode: the decode pipeline beside the image encoder (docs/corpora/showhowto.md, "Decode
pipeline"). Real generated videos, a fake encoder that records what it is sent: the frames and pixels equal a
decode in one process (``media.iter_grid_frames`` + ``clip_preprocess``), batches are full and filled across
videos, results come back in the videos' order, an unreadable video is that video's MediaError, and a worker that
fails, dies or stalls raises instead of hanging."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from builders.models import media
from builders.models.frame_decode import (
    BatchEncoder,
    DecodePool,
    DecodeWorkerError,
    VideoJob,
    default_decode_workers,
    encode_videos,
    in_windows,
)
from builders.models.vision_encoder import clip_preprocess

from corpora.showhowto.conftest import make_video  # tests/ is on sys.path (rootdir, prepend mode)

FPS, SIZE = 5, 16


class Recorder:
    """A batch-invariant stand-in encoder: embedding = per-channel mean and the sum of the pixels; it records every
    batch (its size and its pixels)."""

    image_size = SIZE

    def __init__(self, on_batch=None):
        self.batches: list[np.ndarray] = []
        self.on_batch = on_batch

    def encode_images(self, pixels: np.ndarray) -> np.ndarray:
        self.batches.append(np.array(pixels, copy=True))
        if self.on_batch is not None:
            self.on_batch(len(self.batches))
        return np.concatenate([pixels.mean(axis=(2, 3)), pixels.sum(axis=(1, 2, 3))[:, None]], axis=1)


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("fd")
    return [make_video(d / f"v{i}.mp4", seconds=s, audio=False) for i, s in enumerate((6.0, 4.0, 8.0))]


def jobs_for(paths: list[Path]) -> list[VideoJob]:
    """Windows of different lengths: 11, 6 and 2 + 6 grid frames (some videos add fewer frames than a batch)."""
    spans = [((0.0,), (2.0,)), ((1.0,), (2.0,)), ((0.0, 5.0), (0.2, 6.0))]
    return [VideoJob(str(p), *spans[i % 3]) for i, p in enumerate(paths)]


def reference(job: VideoJob) -> tuple[int, dict[int, np.ndarray]]:
    """What one process computes: the grid, and the preprocessed pixels of the window frames."""
    stats: dict[str, int] = {}
    want = in_windows(job.lo, job.hi, FPS)
    px = {g: clip_preprocess(f, size=SIZE)[0]
          for g, f in media.iter_grid_frames(job.path, fps=FPS, wanted=want, stats=stats) if f is not None}
    return stats["frames"], px


def test_default_is_cores_minus_one():
    assert default_decode_workers() == max(1, len(os.sched_getaffinity(0)) - 1)


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_frames_pixels_and_order_equal_one_process_and_batches_are_full(videos, workers):
    jobs = jobs_for(videos)
    enc = Recorder()
    pool = DecodePool(workers, FPS, SIZE, chunk=4) if workers else None
    try:
        got = list(encode_videos(jobs, enc, 8, FPS, pool))
    finally:
        if pool is not None:
            pool.close()
    assert [k for k, _, _ in got] == [0, 1, 2]
    total = 0
    sent = np.concatenate(enc.batches)
    for (key, n, feats), job in zip(got, jobs):
        ref_n, ref_px = reference(job)
        assert n == ref_n and sorted(feats) == sorted(ref_px)
        for g, px in ref_px.items():  # each frame's embedding is that of its own pixels
            e = Recorder().encode_images(px[None])[0]
            assert np.array_equal(feats[g], e)
        total += len(ref_px)
    assert total == 11 + 6 + 8
    assert [len(b) for b in enc.batches] == [8] * 4  # 25 frames: 3 full batches across videos + 1 padded
    assert not sent[total:].any() and sent[:total].any(axis=(1, 2, 3)).all()  # padding is zeros, after the frames
    if workers <= 1:  # one decoder: the encoder sees the frames in the videos' order and grid order (as before)
        expect = np.stack([px for job in jobs for _, px in sorted(reference(job)[1].items())])
        assert np.array_equal(sent[:total], expect)


@pytest.mark.parametrize("workers", [0, 2])
def test_an_unreadable_video_is_its_own_media_error(videos, tmp_path, workers):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(np.random.default_rng(1).integers(0, 256, 3000, np.uint8).tobytes())
    jobs = [jobs_for(videos)[0], VideoJob(str(junk), (0.0,), (9.0,)), VideoJob(str(tmp_path / "gone.mp4"), (0.0,),
                                                                              (1.0,)), jobs_for(videos)[1]]
    pool = DecodePool(workers, FPS, SIZE, chunk=4) if workers else None
    try:
        got = list(encode_videos(jobs, Recorder(), 8, FPS, pool))
    finally:
        if pool is not None:
            pool.close()
    assert [k for k, _, _ in got] == [0, 1, 2, 3]
    errs = [n for _, n, _ in got[1:3]]
    assert all(isinstance(e, media.MediaError) and e.reason == "video_unreadable" for e in errs)
    with pytest.raises(media.MediaError) as want:
        media.probe(tmp_path / "gone.mp4")
    assert errs[1].detail == want.value.detail
    assert got[0][1] == reference(jobs[0])[0] and len(got[3][2]) == 6 and got[1][2] == {} == got[2][2]


def test_the_pool_is_kept_across_calls_and_restarts_after_a_failure(videos):
    pool = DecodePool(1, FPS, SIZE, chunk=4)
    try:
        list(encode_videos(jobs_for(videos), Recorder(), 8, FPS, pool))
        pids = [p.pid for p in pool._procs]
        list(encode_videos(jobs_for(videos), Recorder(), 8, FPS, pool))
        assert [p.pid for p in pool._procs] == pids  # the same workers
        bad = VideoJob(str(videos[0]), ("x",), ("y",))  # not numbers: a bug, not a property of the video
        with pytest.raises(DecodeWorkerError, match=r"failed on .*v0\.mp4(.|\n)*ValueError"):
            list(encode_videos([bad], Recorder(), 8, FPS, pool))
        assert not pool.running
        got = list(encode_videos(jobs_for(videos), Recorder(), 8, FPS, pool))
        assert [len(f) for _, _, f in got] == [11, 6, 8] and pool.running
    finally:
        pool.close()


def test_a_worker_that_dies_is_reported_with_its_video(tmp_path):
    long = make_video(tmp_path / "long.mp4", seconds=40.0, audio=False)
    pool = DecodePool(1, FPS, SIZE, chunk=4)

    def kill(n: int) -> None:
        if n == 1:  # the worker is at most two chunks ahead: still decoding the video
            os.kill(pool._procs[0].pid, signal.SIGKILL)

    try:
        with pytest.raises(DecodeWorkerError, match=r"exited with code -9 while decoding .*long\.mp4"):
            list(encode_videos([VideoJob(str(long), (0.0,), (40.0,))], Recorder(kill), 4, FPS, pool))
        assert not pool.running
    finally:
        pool.close()


def test_a_stalled_worker_fails_after_the_stall_timeout(tmp_path):
    long = make_video(tmp_path / "long.mp4", seconds=40.0, audio=False)
    pool = DecodePool(1, FPS, SIZE, chunk=4, stall_timeout_s=2.0)
    stopped: list[int] = []

    def stop(n: int) -> None:
        if n == 1:
            stopped.append(pool._procs[0].pid)
            os.kill(stopped[0], signal.SIGSTOP)

    try:
        with pytest.raises(DecodeWorkerError, match=r"no decoded frame for 2 s \(videos in work: .*long\.mp4\)"):
            list(encode_videos([VideoJob(str(long), (0.0,), (40.0,))], Recorder(stop), 4, FPS, pool))
        assert not pool.running  # closed: the stopped worker was killed
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        pool.close()


def test_batch_encoder_spreads_a_chunk_over_batches_and_forgets_closed_videos():
    enc = Recorder()
    b = BatchEncoder(enc, 3, SIZE)
    px = np.ones((5, 3, SIZE, SIZE), np.float32) * np.arange(1, 6, dtype=np.float32)[:, None, None, None]
    b.add(0, [10, 11, 12, 13], px[:4])
    assert enc.batches == [] and b.pending == {0: 4}  # a full batch waits for encode_full (the slot is freed first)
    b.encode_full()
    assert [len(x) for x in enc.batches] == [3] and b.pending == {0: 1}
    b.add(1, [7], px[4:])
    got = b.take(0)  # frame 13 still waits in the batch: video 0 is closed (dropped) now
    assert sorted(got) == [10, 11, 12] and np.array_equal(got[11], Recorder().encode_images(px[1:2])[0])
    b.finish()  # frame 13 is embedded with the padding but not kept
    assert sorted(b.feats) == [1] and b.pending.get(1) == 0 and [len(x) for x in enc.batches] == [3, 3]
    assert sorted(b.feats[1]) == [7] and b.feats[1][7][-1] == 5.0 * 3 * SIZE * SIZE


def test_a_call_abandoned_midway_does_not_leak_into_the_next(videos):
    """A shard that fails after its first video leaves jobs and frames in flight: the next call restarts the
    workers and gets exactly its own frames; closing the abandoned call later leaves the new pool alone."""
    jobs = jobs_for(videos)
    pool = DecodePool(1, FPS, SIZE, chunk=4)
    try:
        first = encode_videos(jobs, Recorder(), 8, FPS, pool)
        assert next(first)[0] == 0
        pids = [p.pid for p in pool._procs]
        got = list(encode_videos(jobs[::-1], Recorder(), 8, FPS, pool))
        assert [p.pid for p in pool._procs] != pids and pool.running
        for (_, n, feats), job in zip(got, jobs[::-1]):
            ref_n, ref_px = reference(job)
            assert n == ref_n and sorted(feats) == sorted(ref_px)
        first.close()  # the abandoned generator ends now
        assert pool.running
        assert [len(f) for _, _, f in encode_videos(jobs, Recorder(), 8, FPS, pool)] == [11, 6, 8]
    finally:
        pool.close()
