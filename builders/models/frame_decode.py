"""The decode pipeline beside the image encoder (docs/corpora/showhowto.md, "Decode pipeline"; docs/scale.md).

ShowHowTo's keyframe stage (Souček et al., CVPR 2025, App. A) embeds every 5-fps grid frame inside some step window
with DFN5B-CLIP. Decoding (PyAV), the centre crop and resize (PIL) and the CLIP normalisation run on the CPU; the
forward pass on the GPU. Here CPU worker processes decode, resize and normalise frames into shared-memory slots
(each worker owns :data:`SLOTS_PER_WORKER` slots of ``chunk`` frames: a bounded prefetch) while the encoder embeds
the previous batch. Batches hold exactly ``batch_size`` frames, filled across the videos of one call; the last is
padded (its padding's embeddings are dropped), so every frame is embedded in a batch of the same shape and its
embedding does not depend on which frames share its batch (with several workers that depends on timing). The batch
buffer is in pinned memory when the encoder runs on CUDA.

Per video, the frames are those of ``models.media.iter_grid_frames`` and the pixels those of
``models.vision_encoder.clip_preprocess``, exactly as when one process does it all (``workers=0``). An unreadable
video is that video's :class:`~builders.models.media.MediaError` (a named drop for the caller); an unexpected error
in a worker, a worker that dies or a stall past ``stall_timeout_s`` raises :class:`DecodeWorkerError` naming the
video (every wait is bounded), and the pool is closed.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: frames a worker writes to one shared-memory slot before handing it over, at least (toolkit; :func:`chunk_frames`)
MIN_CHUNK = 8
#: slots each worker owns: it decodes at most this many chunks ahead of the encoder (toolkit)
SLOTS_PER_WORKER = 2
#: a call waiting this long for any worker message fails (a worker stuck in a decoder; toolkit)
STALL_TIMEOUT_S = 600.0
_POLL_S = 0.5


def default_decode_workers() -> int:
    """Cores this process may use, minus one (for the encoder's own process), at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def chunk_frames(workers: int, batch_size: int) -> int:
    """Frames a slot holds: the workers' slots together hold two batches (one being filled while the encoder embeds
    the other), at least :data:`MIN_CHUNK` frames and at most a batch a slot."""
    per_slot = -(-2 * batch_size // max(1, workers * SLOTS_PER_WORKER))
    return max(1, min(batch_size, max(MIN_CHUNK, per_slot)))


class DecodeWorkerError(RuntimeError):
    """A decode worker failed for a reason other than the video (a bug, a crash, a stall): the call fails."""


@dataclass(frozen=True)
class VideoJob:
    """One video: its file and the step windows ``[lo_k, hi_k]`` (seconds); grid frames inside some window are
    decoded to pixels, the others only counted."""

    path: str
    lo: tuple[float, ...]
    hi: tuple[float, ...]


def in_windows(lo: Any, hi: Any, fps: int) -> Callable[[int], bool]:
    """``wanted(g)``: grid frame ``g`` (time ``g / fps``) lies inside some window (1e-6 s slack)."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)

    def wanted(g: int) -> bool:
        t = g / fps
        return bool(np.any((lo - 1e-6 <= t) & (t <= hi + 1e-6)))

    return wanted


def decode_video(job: VideoJob, fps: int, size: int, stats: dict[str, int]) -> Iterator[tuple[int, np.ndarray]]:
    """``(g, pixels [3, size, size] float32)`` for every wanted grid frame, in order; ``stats["frames"]`` is the
    grid's length once the generator is exhausted. Raises ``MediaError`` for an unreadable video."""
    from . import media
    from .vision_encoder import clip_preprocess

    for g, frame in media.iter_grid_frames(job.path, fps=fps, wanted=in_windows(job.lo, job.hi, fps), stats=stats):
        if frame is not None:
            yield g, clip_preprocess(frame, size=size)[0]


# ================================================================================================ the workers
def _worker(wid: int, fps: int, size: int, chunk: int, shm_name: str, first_slot: int, nslots: int, tasks: Any,
            results: Any, free: Any, parent: int) -> None:
    """A decode process: jobs from ``tasks``; pixels into its own slots; messages ``start``, ``chunk``, ``done``,
    ``error`` (the video's MediaError) and ``failed`` (anything else) on ``results``. Ends on ``None`` or when its
    parent is gone."""
    from multiprocessing import shared_memory

    from .media import MediaError

    shm = shared_memory.SharedMemory(name=shm_name)
    slots = np.ndarray((first_slot + nslots, chunk, 3, size, size), np.float32, buffer=shm.buf)
    turn, blocked = 0, 0.0

    def acquire() -> int:
        nonlocal turn, blocked
        t0 = time.perf_counter()
        while not free.acquire(timeout=_POLL_S):
            if os.getppid() != parent:
                raise SystemExit(0)
        slot, turn = first_slot + turn, (turn + 1) % nslots
        blocked += time.perf_counter() - t0
        return slot

    try:
        while True:
            try:
                task = tasks.get(timeout=_POLL_S)
            except queue.Empty:
                if os.getppid() != parent:
                    return
                continue
            if task is None:
                return
            key, job = task
            results.put(("start", wid, key))
            stats: dict[str, int] = {}
            slot, gs, blocked, t0 = None, [], 0.0, time.perf_counter()
            try:
                for g, px in decode_video(job, fps, size, stats):
                    if slot is None:
                        slot = acquire()
                    slots[slot, len(gs)] = px
                    gs.append(g)
                    if len(gs) == chunk:
                        results.put(("chunk", wid, key, slot, gs))
                        slot, gs = None, []
                if gs:
                    results.put(("chunk", wid, key, slot, gs))
                    slot = None
                busy = time.perf_counter() - t0 - blocked  # decoding, not waiting for a free slot
                results.put(("done", wid, key, int(stats.get("frames", 0)), busy))
            except MediaError as e:
                results.put(("error", wid, key, e.reason, e.detail, time.perf_counter() - t0 - blocked))
            except Exception:
                results.put(("failed", wid, key, traceback.format_exc()[-3000:]))
            if slot is not None:  # taken but never handed over: give it back, reuse it next
                free.release()
                turn = (turn - 1) % nslots
    finally:
        del slots
        shm.close()


class DecodePool:
    """``workers`` decode processes (spawned once, kept across calls) and their shared-memory slots."""

    def __init__(self, workers: int, fps: int, image_size: int, chunk: int = MIN_CHUNK,
                 stall_timeout_s: float = STALL_TIMEOUT_S):
        if workers < 1:
            raise ValueError(f"a decode pool needs at least one worker, got {workers}")
        self.workers, self.fps, self.size, self.chunk = int(workers), int(fps), int(image_size), int(chunk)
        self.stall_timeout_s = float(stall_timeout_s)
        self._procs: list[Any] = []
        self._shm: Any = None
        self._active = False  # a stream is under way (an abandoned one leaves messages behind: restart)
        self._calls = 0
        #: seconds the workers spent decoding (not waiting for a free slot), summed over workers and calls
        self.busy_s = 0.0

    @property
    def running(self) -> bool:
        return bool(self._procs)

    def start(self) -> None:
        if self._procs:
            return
        from multiprocessing import shared_memory

        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold CUDA or torch threads
        n = self.workers * SLOTS_PER_WORKER
        self._shm = shared_memory.SharedMemory(create=True, size=n * self.chunk * 3 * self.size * self.size * 4)
        self.slots = np.ndarray((n, self.chunk, 3, self.size, self.size), np.float32, buffer=self._shm.buf)
        self.tasks, self.results = ctx.Queue(), ctx.Queue()
        self.free = [ctx.Semaphore(SLOTS_PER_WORKER) for _ in range(self.workers)]
        for w in range(self.workers):
            p = ctx.Process(target=_worker, name=f"frame-decode-{w}", daemon=True,
                            args=(w, self.fps, self.size, self.chunk, self._shm.name, w * SLOTS_PER_WORKER,
                                  SLOTS_PER_WORKER, self.tasks, self.results, self.free[w], os.getpid()))
            p.start()
            self._procs.append(p)

    def close(self) -> None:
        """Stop the workers (a sentinel each; SIGKILL after a bounded wait) and free the slots."""
        procs, self._procs = self._procs, []
        for _ in procs:
            try:
                self.tasks.put(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 5.0
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()  # a worker stuck in a decoder (or stopped): SIGKILL reaches it in any state
                p.join(timeout=5.0)
        for q in ("tasks", "results"):
            if hasattr(self, q):
                getattr(self, q).cancel_join_thread()
                getattr(self, q).close()
        self._active = False
        if self._shm is not None:
            self.slots = None
            try:
                self._shm.close()
            except BufferError:  # a view of a slot is still referenced (a traceback): freed with it
                pass
            self._shm.unlink()
            self._shm = None

    def __enter__(self) -> DecodePool:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _get(self, jobs: dict[int, VideoJob], current: dict[int, int]) -> tuple:
        """The next message; a dead worker or a stall raises :class:`DecodeWorkerError` naming its video."""
        waited = 0.0
        while True:
            try:
                return self.results.get(timeout=_POLL_S)
            except queue.Empty:
                waited += _POLL_S
            for w, p in enumerate(self._procs):
                if not p.is_alive():
                    key = current.get(w)
                    where = f" while decoding {jobs[key].path}" if key is not None else ""
                    raise DecodeWorkerError(f"decode worker {w} (pid {p.pid}) exited with code {p.exitcode}{where}")
            if waited >= self.stall_timeout_s:
                busy = ", ".join(jobs[k].path for k in current.values()) or "none"
                raise DecodeWorkerError(f"no decoded frame for {self.stall_timeout_s:.0f} s (videos in work: {busy})")

    def stream(self, jobs: list[VideoJob], on_frames: Callable[[int, list[int], np.ndarray], None],
               after_frames: Callable[[], None] = lambda: None) -> Iterator[tuple[int, int | Exception]]:
        """Decode ``jobs`` (at most ``2 * workers`` dispatched ahead of the oldest unfinished one). Every chunk goes
        to ``on_frames(index, gs, pixels)`` (a view valid during the call), then ``after_frames()`` runs once its
        slot is free again; each video ends with ``(index, grid frames)`` or ``(index, MediaError)``, in the order
        the videos finish. Any other failure closes the pool and raises :class:`DecodeWorkerError`."""
        from .media import MediaError

        if not jobs:
            return
        if self._active:  # the previous call was abandoned midway: its jobs and messages must not reach this one
            self.close()
        self.start()
        self._active, self._calls = True, self._calls + 1
        mine = self._calls
        by_key = dict(enumerate(jobs))
        current: dict[int, int] = {}
        ahead, sent, finished, oldest = 2 * self.workers, 0, 0, 0
        ended: set[int] = set()
        try:
            while finished < len(jobs):
                while oldest in ended:
                    oldest += 1
                while sent < len(jobs) and sent < oldest + ahead:
                    self.tasks.put((sent, jobs[sent]))
                    sent += 1
                msg = self._get(by_key, current)
                kind, w, key = msg[0], msg[1], msg[2]
                if kind == "start":
                    current[w] = key
                elif kind == "chunk":
                    slot, gs = msg[3], msg[4]
                    try:
                        on_frames(key, gs, self.slots[slot, :len(gs)])
                    finally:
                        self.free[w].release()
                    after_frames()
                else:
                    current.pop(w, None)
                    ended.add(key)
                    finished += 1
                    if kind == "done":
                        self.busy_s += msg[4]
                        yield key, int(msg[3])
                    elif kind == "error":
                        self.busy_s += msg[5]
                        yield key, MediaError(msg[3], msg[4])
                    else:
                        raise DecodeWorkerError(f"decode worker {w} failed on {jobs[key].path}:\n{msg[3]}")
            self._active = False
        except BaseException:
            if self._calls == mine:  # (an abandoned call closed late must not close a later call's pool)
                self.close()  # jobs may still be queued or in work: the pool restarts on the next call
            raise


# ================================================================================================ the encoder side
def _pinned(shape: tuple[int, ...], device: str) -> np.ndarray:
    """A float32 host buffer, page-locked when ``device`` is CUDA (faster, asynchronous host-to-device copies)."""
    if str(device).startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            return torch.empty(shape, dtype=torch.float32).pin_memory().numpy()
    return np.empty(shape, np.float32)


@dataclass
class BatchEncoder:
    """Fills batches of exactly ``batch_size`` frames from any videos: :meth:`add` copies frames in (a full batch
    waits, a new buffer takes the rest), :meth:`encode_full` embeds the full ones (called once the frames' slot is
    free again, so that the workers decode while the encoder runs), :meth:`finish` pads and embeds the last.
    ``feats[index][g]`` is the embedding of grid frame ``g`` of video ``index``; ``pending[index]`` counts its frames
    not embedded yet. ``sizes`` records every batch sent and ``encode_s`` the encoder's wall time."""

    encoder: Any
    batch_size: int
    size: int
    feats: dict[int, dict[int, np.ndarray]] = field(default_factory=dict)
    pending: dict[int, int] = field(default_factory=dict)
    sizes: list[int] = field(default_factory=list)
    encode_s: float = 0.0
    closed: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._device = getattr(self.encoder, "device", "cpu")
        self._spare: list[np.ndarray] = []
        self._full: list[tuple[np.ndarray, list[tuple[int, int]]]] = []
        self.buf = self._buffer()
        self.owners: list[tuple[int, int]] = []

    def _buffer(self) -> np.ndarray:
        return self._spare.pop() if self._spare else _pinned((self.batch_size, 3, self.size, self.size), self._device)

    def add(self, key: int, gs: list[int], pixels: np.ndarray) -> None:
        i = 0
        while i < len(gs):
            n = min(len(gs) - i, self.batch_size - len(self.owners))
            self.buf[len(self.owners):len(self.owners) + n] = pixels[i:i + n]
            self.owners += [(key, g) for g in gs[i:i + n]]
            self.pending[key] = self.pending.get(key, 0) + n
            i += n
            if len(self.owners) == self.batch_size:
                self._full.append((self.buf, self.owners))
                self.buf, self.owners = self._buffer(), []

    def encode_full(self) -> None:
        while self._full:
            buf, owners = self._full.pop(0)
            self._encode(buf, owners)
            self._spare.append(buf)

    def finish(self) -> None:
        """Embed what is left, the last batch padded with zeros (the padding's embeddings are dropped)."""
        self.encode_full()
        if self.owners:
            self.buf[len(self.owners):] = 0.0
            self._encode(self.buf, self.owners)
            self.owners = []

    def _encode(self, buf: np.ndarray, owners: list[tuple[int, int]]) -> None:
        t0 = time.perf_counter()
        out = np.asarray(self.encoder.encode_images(buf))
        self.encode_s += time.perf_counter() - t0
        self.sizes.append(len(buf))
        if len(out) != len(buf):
            raise ValueError(f"the encoder returned {len(out)} embeddings for {len(buf)} frames")
        for (key, g), e in zip(owners, out):
            if key not in self.closed:  # a video dropped meanwhile: its frames' embeddings are not kept
                self.feats.setdefault(key, {})[g] = np.array(e, copy=True)
                self.pending[key] -= 1

    def take(self, key: int) -> dict[int, np.ndarray]:
        """Video ``key``'s embeddings; frames of it still waiting in a batch are not kept."""
        self.closed.add(key)
        self.pending.pop(key, None)
        return self.feats.pop(key, {})


def encode_videos(jobs: list[VideoJob], encoder: Any, batch_size: int, fps: int, pool: DecodePool | None = None
                  ) -> Iterator[tuple[int, int | Exception, dict[int, np.ndarray]]]:
    """Embed the window frames of every video: ``(index, grid frames | MediaError, {g: embedding})`` in the order
    of ``jobs``, each as soon as it and the videos before it are embedded. With ``pool`` the frames are decoded by
    its workers while the encoder runs; without, in this process (the frames then reach the encoder in the order
    of the jobs and of their grid)."""
    size = int(encoder.image_size)
    batches = BatchEncoder(encoder, int(batch_size), size)
    ended: dict[int, int | Exception] = {}
    nxt = 0

    def ready() -> Iterator[tuple[int, int | Exception, dict[int, np.ndarray]]]:
        nonlocal nxt
        while nxt in ended and (isinstance(ended[nxt], Exception) or not batches.pending.get(nxt)):
            yield nxt, ended.pop(nxt), batches.take(nxt)
            nxt += 1

    if pool is None:
        from .media import MediaError

        for key, job in enumerate(jobs):
            stats: dict[str, int] = {}
            try:
                for g, px in decode_video(job, fps, size, stats):
                    batches.add(key, [g], px[None])
                    batches.encode_full()
                ended[key] = int(stats.get("frames", 0))
            except MediaError as e:
                ended[key] = e
            yield from ready()
    else:
        if pool.size != size:
            raise ValueError(f"the decode pool resizes to {pool.size} px, the encoder takes {size}")
        for key, res in pool.stream(jobs, batches.add, batches.encode_full):
            ended[key] = res
            yield from ready()
    batches.finish()
    yield from ready()
