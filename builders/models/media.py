"""Media decoding with PyAV: find video files, probe them, decode 16 kHz mono audio and 1-fps frames.

HowToStep media (docs/corpora/howtostep.md, Inputs: videos ``<vid>.<mp4|webm|mkv>``, searched recursively; audio decoded
to 16 kHz mono for ASR; unreadable files -> ``video_unreadable``; no audio stream -> ``no_audio``) and features (frames
at 1 fps, ffmpeg ``fps=1`` semantics; ``T = floor(duration)`` rows; missing trailing frames repeat the last decoded
frame and are counted). ``av`` is imported lazily (PLAN import rules); it comes with ``faster-whisper``
(docs/getting-started.md).
"""

from __future__ import annotations

import math
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

MEDIA_EXTENSIONS = (".mp4", ".webm", ".mkv")     # docs/corpora/howtostep.md, Inputs
SAMPLE_RATE = 16000                              # Whisper input, 16 kHz mono
MAX_FILE_BYTES = 8 << 30                         # toolkit cap: refuse files over 8 GiB
MAX_AUDIO_SECONDS = 6 * 3600.0                   # toolkit cap: refuse audio over 6 h (1.4 GB of float32 at 16 kHz)
MAX_VIDEO_SECONDS = 6 * 3600.0                   # toolkit cap: a frame grid covers at most 6 h of video
#: frame grid rates :func:`iter_grid_frames` accepts (frames a second); ShowHowTo's ``fps`` key is checked against
#: the same range when the config is read (builders/corpora/showhowto/config.py ``FPS_RANGE``; docs/configuration.md)
GRID_FPS_RANGE = (1, 60)
#: a stream that decodes to less than its declared duration minus max(1 s, 5 %) counts as truncated (toolkit choice)
TRUNCATION_TOLERANCE_S = 1.0
TRUNCATION_TOLERANCE_FRAC = 0.05
#: like the ffmpeg CLI, packets that fail to decode are skipped; more than max(2, 5 %) of them -> unreadable (toolkit)
MAX_BAD_PACKET_FRAC = 0.05


class MediaError(Exception):
    """An unusable media file; ``reason`` is the drop reason of docs/reason-codes.md
    (``video_unreadable``|``no_audio``)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail

    def __reduce__(self):  # picklable across process pools / Ray
        return (MediaError, (self.reason, self.detail))


@dataclass
class MediaInfo:
    """What :func:`probe` reads from the container header (no decoding)."""

    duration: float | None
    has_audio: bool
    has_video: bool
    width: int
    height: int
    fps: float | None


def find_media(root: str | Path) -> dict[str, Path]:
    """``{vid: path}`` for every ``<vid>.<mp4|webm|mkv>`` under ``root`` (recursive; paths sorted, the first wins).

    docs/corpora/howtostep.md, Inputs. The extension match ignores case; hidden files are skipped. A missing folder
    raises FileNotFoundError. An entry so named that is no regular file (a dangling link, a loop of links, a
    directory, a FIFO) is the video's path when no regular file names the video: opening it is then that video's
    ``video_unreadable`` drop naming the path and its problem (never skipped silently, never opened as a file).
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"media folder not found: {root}")
    named = sorted(p for p in root.rglob("*") if p.suffix.lower() in MEDIA_EXTENSIONS and not p.name.startswith("."))
    files = [p for p in named if p.is_file()]
    found: dict[str, Path] = {}
    for path in files + [p for p in named if not p.is_file()]:
        found.setdefault(path.name[: -len(path.suffix)], path)
    return found


def _av() -> Any:
    import av  # lazy: heavy, and optional for builds that read transcripts

    return av


def _open(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """Open a container, mapping every failure to ``MediaError("video_unreadable")``."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        why = "dangling symbolic link" if isinstance(e, FileNotFoundError) and path.is_symlink() else str(e)
        raise MediaError("video_unreadable", f"{path}: {why}") from e
    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device: never handed to the demuxer (issue 20)
        raise MediaError("video_unreadable", f"{path}: not a regular file")
    size = st.st_size
    if size == 0:
        raise MediaError("video_unreadable", f"{path}: empty file")
    if size > max_bytes:
        raise MediaError("video_unreadable", f"{path}: {size} bytes, over the {max_bytes}-byte cap")
    av = _av()
    try:
        return av.open(str(path), metadata_errors="ignore")
    except (av.error.FFmpegError, OSError, ValueError, UnicodeDecodeError) as e:
        raise MediaError("video_unreadable", f"{path}: {type(e).__name__}: {e}") from e


def _container_duration(container: Any) -> float | None:
    if container.duration is not None and container.duration > 0:
        return container.duration / 1_000_000  # AV_TIME_BASE
    durations = [_stream_duration(s) for s in container.streams if s.type in ("audio", "video")]
    durations = [d for d in durations if d is not None]
    return max(durations) if durations else None


def _stream_duration(stream: Any) -> float | None:
    if stream.duration is not None and stream.duration > 0 and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if stream.type == "video" and stream.frames and stream.average_rate:
        return stream.frames / float(stream.average_rate)
    return None


def probe(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> MediaInfo:
    """Duration (container, else the longest stream), streams and video size; ``MediaError`` when unreadable."""
    container = _open(path, max_bytes)
    try:
        video = container.streams.video[0] if container.streams.video else None
        has_audio = bool(container.streams.audio)
        if video is None and not has_audio:
            raise MediaError("video_unreadable", f"{path}: no audio or video stream")
        rate = (video.average_rate or video.guessed_rate) if video is not None else None
        return MediaInfo(duration=_container_duration(container), has_audio=has_audio, has_video=video is not None,
                         width=int(video.codec_context.width) if video is not None else 0,
                         height=int(video.codec_context.height) if video is not None else 0,
                         fps=float(rate) if rate else None)
    finally:
        container.close()


def _check_truncated(path: Any, stream: Any, decoded_s: float) -> None:
    declared = _stream_duration(stream)
    if declared is None:
        return
    tolerance = max(TRUNCATION_TOLERANCE_S, TRUNCATION_TOLERANCE_FRAC * declared)
    if decoded_s < declared - tolerance:
        raise MediaError("video_unreadable", f"{path}: truncated {stream.type} stream: decoded {decoded_s:.2f} s "
                                             f"of the declared {declared:.2f} s")


def _decoded(container: Any, stream: Any, path: Any, stats: dict[str, int] | None = None) -> Iterator[Any]:
    """Decode ``stream`` packet by packet, skipping packets the decoder rejects (ffmpeg CLI behaviour).

    A demuxer error ends the stream like EOF (the caller's truncation check then decides); too many rejected packets
    raise ``MediaError("video_unreadable")``.
    """
    av = _av()
    bad = total = 0
    packets = container.demux(stream)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            break
        except (av.error.FFmpegError, ValueError):
            break
        total += 1
        try:
            frames = packet.decode()  # the final empty packet flushes the decoder
        except (av.error.FFmpegError, ValueError):
            bad += 1
            continue
        yield from frames
    if stats is not None:
        stats.update(packets=total, bad_packets=bad)
    if bad > max(2, MAX_BAD_PACKET_FRAC * total):
        raise MediaError("video_unreadable", f"{path}: {bad} of {total} {stream.type} packets failed to decode")


def decode_audio(path: str | Path, sample_rate: int = SAMPLE_RATE, max_seconds: float = MAX_AUDIO_SECONDS,
                 max_bytes: int = MAX_FILE_BYTES) -> np.ndarray:
    """The first ("best") audio stream as float32 mono samples in [-1, 1] at ``sample_rate``.

    Like ``whisperx.load_audio`` (ffmpeg to 16 kHz mono), samples start at the stream's first sample (no padding for
    a start offset). Raises ``MediaError("no_audio")`` without an audio stream and ``MediaError("video_unreadable")``
    for corrupt or truncated files and audio longer than ``max_seconds``.
    """
    av = _av()
    container = _open(path, max_bytes)
    try:
        if not container.streams.audio:
            raise MediaError("no_audio", f"{path}: no audio stream")
        stream = container.streams.best("audio") or container.streams.audio[0]
        declared = _stream_duration(stream) or _container_duration(container)
        if declared is not None and declared > max_seconds:
            raise MediaError("video_unreadable", f"{path}: {declared:.0f} s of audio, over the {max_seconds:.0f} s cap")
        resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
        chunks: list[np.ndarray] = []
        counts: dict[str, int] = {}
        total, cap = 0, int(max_seconds * sample_rate)
        try:
            for frame in _decoded(container, stream, path, counts):
                frame.pts = None  # resample by sample count; input timestamp gaps must not stall the resampler
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
                    total += chunks[-1].size
                if total > cap:
                    raise MediaError("video_unreadable", f"{path}: audio longer than the {max_seconds:.0f} s cap")
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
        except (av.error.FFmpegError, ValueError) as e:
            raise MediaError("video_unreadable", f"{path}: {type(e).__name__}: {e}") from e
        if not chunks:  # an empty audio track is no audio; packets that all failed are a broken file
            reason = "video_unreadable" if counts.get("bad_packets") else "no_audio"
            raise MediaError(reason, f"{path}: no decodable audio")
        audio = np.concatenate(chunks).astype(np.float32, copy=False)
        _check_truncated(path, stream, audio.size / sample_rate)
        return np.clip(audio, -1.0, 1.0)
    finally:
        container.close()


def _tick(frame: Any, stream: Any, start: Fraction, index: int, fps: Fraction | None) -> int:
    """The output second a frame rounds to: ``av_rescale_q_rnd(pts, tb, 1/1, AV_ROUND_NEAR_INF)`` (ffmpeg vf_fps)."""
    if frame.pts is not None and stream.time_base is not None:
        t = Fraction(frame.pts) * Fraction(stream.time_base) - start
    else:  # no timestamps: the frame's index at the nominal rate
        t = Fraction(index) / (fps or 1)
    return math.floor(t + Fraction(1, 2)) if t >= 0 else -math.floor(-t + Fraction(1, 2))


def iter_frames_1fps(path: str | Path, num_seconds: int | None = None, max_bytes: int = MAX_FILE_BYTES,
                     stats: dict[str, int] | None = None) -> Iterator[np.ndarray]:
    """Yield ``T`` uint8 RGB frames [H, W, 3], row ``t`` = second t, streaming (docs/corpora/howtostep.md, Inputs).

    Frame selection is ffmpeg's ``fps=1`` filter (libavfilter vf_fps.c, default ``round=near``): every decoded frame's
    timestamp (relative to the container start) is rounded to the nearest integer second and tick ``t`` takes the
    *last* frame whose rounded time is <= t, i.e. the frame nearest t in ffmpeg's sense (for 10-fps input: the frame
    at t + 0.4 s), duplicating frames across gaps. ``T = floor(duration)`` unless ``num_seconds`` is given. Ticks
    before the first frame and after the last frame's tick repeat the nearest decoded frame; their number is stored
    in ``stats["padded_rows"]`` (and ``stats["T"]``) when the generator finishes.
    """
    av = _av()
    stats = stats if stats is not None else {}
    container = _open(path, max_bytes)
    try:
        if not container.streams.video:
            raise MediaError("video_unreadable", f"{path}: no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        if num_seconds is None:
            duration = _container_duration(container)
            if duration is None:
                raise MediaError("video_unreadable", f"{path}: unknown duration; pass num_seconds")
            num_seconds = math.floor(duration + 1e-6)
        T = max(int(num_seconds), 0)
        start = Fraction(container.start_time or 0, 1_000_000)
        rate = stream.average_rate or stream.guessed_rate
        fps = Fraction(rate) if rate else None
        stats.update(T=T, padded_rows=0)
        next_tick, padded = 0, 0
        cur, cur_arr, cur_tick, last_time, ended = None, None, 0, 0.0, False

        def array() -> np.ndarray:
            nonlocal cur_arr
            if cur_arr is None:  # convert only frames that are emitted
                cur_arr = cur.to_ndarray(format="rgb24")
            return cur_arr

        try:
            for index, frame in enumerate(_decoded(container, stream, path, stats)):
                if T == 0:
                    break
                tick = _tick(frame, stream, start, index, fps)
                if cur is None:  # ticks before the first frame repeat it (padding)
                    cur, cur_arr = frame, None
                    lead = min(max(tick, 0), T)
                    for _ in range(lead):
                        yield array()
                    next_tick, padded = lead, lead
                else:
                    while next_tick < min(tick, T):
                        yield array()
                        next_tick += 1
                    cur, cur_arr = frame, None
                cur_tick = tick
                last_time = float(frame.time) - float(start) if frame.time is not None else index / float(fps or 1)
                if next_tick >= T:
                    ended = True
                    break
        except (av.error.FFmpegError, ValueError) as e:
            raise MediaError("video_unreadable", f"{path}: {type(e).__name__}: {e}") from e
        if cur is None and T > 0:
            raise MediaError("video_unreadable", f"{path}: no decodable video frame")
        if cur is not None and not ended:
            _check_truncated(path, stream, last_time + (1 / float(fps) if fps else 0.0))
        while next_tick < T:  # the last frame's own tick, then missing trailing frames (padding)
            padded += next_tick > cur_tick
            yield array()
            next_tick += 1
        stats.update(T=T, padded_rows=padded)
    finally:
        container.close()


def frames_1fps(path: str | Path, num_seconds: int | None = None,
                max_bytes: int = MAX_FILE_BYTES) -> tuple[np.ndarray, int]:
    """All 1-fps frames as uint8 ``[T, H, W, 3]`` plus ``padded_rows`` (see :func:`iter_frames_1fps`).

    Holds every frame in memory: use :func:`iter_frames_1fps` for long or large videos.
    """
    stats: dict[str, int] = {}
    frames = list(iter_frames_1fps(path, num_seconds, max_bytes, stats))
    if frames:
        return np.stack(frames), stats["padded_rows"]
    info = probe(path, max_bytes)
    return np.zeros((0, info.height, info.width, 3), np.uint8), stats.get("padded_rows", 0)


def check_grid_fps(fps: Any) -> int:
    """``fps`` as an int in :data:`GRID_FPS_RANGE`; ``ValueError`` otherwise (a caller's or config error, never a
    property of the video: it must not become a ``video_unreadable`` drop; issue 20)."""
    lo, hi = GRID_FPS_RANGE
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps != int(fps) \
            or not lo <= fps <= hi:
        raise ValueError(f"frame grid fps must be an integer in [{lo}, {hi}], got {fps!r}")
    return int(fps)


def iter_grid_frames(path: str | Path, fps: int = 5, wanted: Any = None, max_bytes: int = MAX_FILE_BYTES,
                     max_frames: int | None = None, stats: dict[str, int] | None = None
                     ) -> Iterator[tuple[int, np.ndarray | None]]:
    """Frames of ffmpeg's ``fps=<fps>`` output grid, streaming: yields ``(g, rgb)`` for every grid frame ``g`` (time
    ``g / fps`` s from the container start), ``rgb`` a uint8 [H, W, 3] array when ``wanted(g)`` is true, else None
    (no pixel conversion). ShowHowTo (docs/corpora/showhowto.md): the grid is decoded once, ``t_last = (N - 1) / fps``
    for ``N`` grid frames.

    Selection as vf_fps with ``round=near`` (see :func:`iter_frames_1fps`): tick ``g`` takes the last decoded frame
    whose time rounds to ``<= g``; ticks before the first frame repeat it. Unlike the HowToStep 1-fps reader there
    is no trailing padding and no truncation error: a truncated file simply ends its grid at its last decodable frame
    (docs/reason-codes.md), whose count is in ``stats["frames"]``. No decodable frame ->
    ``MediaError("video_unreadable")``.

    ``fps`` must lie in :data:`GRID_FPS_RANGE` (``ValueError``); ``max_frames`` (default: :data:`MAX_VIDEO_SECONDS`
    of grid at ``fps``) caps the grid, a longer video is ``video_unreadable``.
    """
    av = _av()
    fps = check_grid_fps(fps)
    if max_frames is None:
        max_frames = int(MAX_VIDEO_SECONDS * fps)
    stats = stats if stats is not None else {}
    want = wanted if wanted is not None else (lambda g: False)
    container = _open(path, max_bytes)
    rate = Fraction(int(fps))
    try:
        if not container.streams.video:
            raise MediaError("video_unreadable", f"{path}: no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        start = Fraction(container.start_time or 0, 1_000_000)
        nominal = stream.average_rate or stream.guessed_rate
        nominal = Fraction(nominal) if nominal else None
        g, cur, decoded = 0, None, 0

        def emit(frame: Any, upto: int) -> Iterator[tuple[int, np.ndarray | None]]:
            nonlocal g
            arr = None
            while g < upto:
                if g >= max_frames:
                    raise MediaError("video_unreadable", f"{path}: more than {max_frames} grid frames (toolkit cap)")
                if want(g):
                    arr = arr if arr is not None else frame.to_ndarray(format="rgb24")
                    yield g, arr
                else:
                    yield g, None
                g += 1

        try:
            for index, frame in enumerate(_decoded(container, stream, path, stats)):
                decoded += 1
                if frame.pts is not None and stream.time_base is not None:
                    t = Fraction(frame.pts) * Fraction(stream.time_base) - start
                else:
                    t = Fraction(index) / (nominal or 1)
                tick = math.floor(t * rate + Fraction(1, 2)) if t >= 0 else -math.floor(-t * rate + Fraction(1, 2))
                if cur is None:
                    cur = frame
                    continue
                yield from emit(cur, tick)   # ticks before this frame's own tick show the previous frame
                cur = frame
            if cur is not None:
                yield from emit(cur, g + 1)  # the last frame's own tick (or the next one when it was shown already)
        except (av.error.FFmpegError, ValueError) as e:
            raise MediaError("video_unreadable", f"{path}: {type(e).__name__}: {e}") from e
        if cur is None:
            raise MediaError("video_unreadable", f"{path}: no decodable video frame")
        stats.update(frames=g, decoded=decoded)
    finally:
        container.close()
