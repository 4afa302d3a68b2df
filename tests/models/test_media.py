"""builders.models.media: find, probe, 16 kHz audio, 1-fps frames (ffmpeg fps=1) and the bad-input set (spec §2.3, §2.4,
§7). Every clip is generated here with PyAV (mpeg4 + AAC encoders are built into its wheels; no ffmpeg CLI needed)."""

from __future__ import annotations

import json
import pickle
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from builders.models import media
from builders.models.media import MediaError

av = pytest.importorskip("av")
SAMPLES = Path(__file__).resolve().parents[2] / "builders" / "samples" / "howtostep" / "videos"


def make_clip(path: Path, seconds: float = 5, fps: Fraction | int = 4, audio_rate: int | None = 22050,
              faststart: bool = False, first_pts: int = 0, size: tuple[int, int] = (64, 48)) -> Path:
    """mpeg4 video whose frame i is grey level 10*i (mod 250) + a 440 Hz sine at amplitude 0.5 (AAC)."""
    c = av.open(str(path), "w", options={"movflags": "faststart"} if faststart else {})
    v = c.add_stream("mpeg4", rate=fps, options={"qscale": "1"})
    v.width, v.height, v.pix_fmt = size[0], size[1], "yuv420p"
    a = None
    if audio_rate:
        a = c.add_stream("aac", rate=audio_rate)
        a.layout = "mono"
    n = round(seconds * fps)
    for i in range(n):
        frame = av.VideoFrame.from_ndarray(np.full((size[1], size[0], 3), (10 * i) % 250, np.uint8), format="rgb24")
        frame.pts = first_pts + i
        c.mux(v.encode(frame))
    c.mux(v.encode())
    if a is not None:
        t = np.arange(int(seconds * audio_rate)) / audio_rate
        x = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        step = a.codec_context.frame_size or 1024
        for k in range(0, x.size, step):
            frame = av.AudioFrame.from_ndarray(x[None, k:k + step].copy(), format="flt", layout="mono")
            frame.sample_rate, frame.pts = audio_rate, k
            c.mux(a.encode(frame))
        c.mux(a.encode())
    c.close()
    return path


def grey_index(frames: np.ndarray) -> list[int]:
    """Recover each frame's generator index from its grey level (10*i)."""
    return [round(float(f[..., 0].mean()) / 10) for f in frames]


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("media")
    out = {"av": make_clip(d / "av.mp4"), "avf": make_clip(d / "avf.mp4", faststart=True),
           "noaudio": make_clip(d / "noaudio.mp4", audio_rate=None)}
    for key in ("av", "avf"):  # first half of the bytes: moov at the end (unopenable) and at the start (truncated)
        data = out[key].read_bytes()
        out[f"trunc_{key}"] = d / f"trunc_{key}.mp4"
        out[f"trunc_{key}"].write_bytes(data[: len(data) // 2])
    out["random"] = d / "random.mp4"
    out["random"].write_bytes(np.random.default_rng(0).bytes(20000))
    out["empty"] = d / "empty.mp4"
    out["empty"].write_bytes(b"")
    return out


def test_find_media_recursive_sorted_first_wins(tmp_path):
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    for name in ["a.mp4", "sub/a.mkv", "sub/b.webm", "sub/deeper/-dash_id.MP4", "c.txt", "sub/.hidden.mp4",
                 "x.y.mkv"]:
        (tmp_path / name).write_bytes(b"x")
    found = media.find_media(tmp_path)
    assert found == {"a": tmp_path / "a.mp4", "b": tmp_path / "sub" / "b.webm",
                     "-dash_id": tmp_path / "sub" / "deeper" / "-dash_id.MP4", "x.y": tmp_path / "x.y.mkv"}
    with pytest.raises(FileNotFoundError):
        media.find_media(tmp_path / "missing")


def test_probe_reads_the_header(clips):
    info = media.probe(clips["av"])
    assert (info.has_audio, info.has_video, info.width, info.height, info.fps) == (True, True, 64, 48, 4.0)
    assert info.duration == pytest.approx(5.0, abs=0.1)
    noa = media.probe(clips["noaudio"])
    assert not noa.has_audio and noa.has_video and noa.duration == pytest.approx(5.0, abs=0.01)


def test_decode_audio_is_16k_mono_float32(clips):
    x = media.decode_audio(clips["av"])
    assert x.dtype == np.float32 and x.ndim == 1
    assert abs(x.size - 5 * 16000) <= 1024 * 16000 // 22050 + 1024  # AAC priming/padding at most one frame
    assert float(np.abs(x).max()) == pytest.approx(0.5, abs=0.03)
    spectrum = np.abs(np.fft.rfft(x[16000:32000]))
    assert int(np.argmax(spectrum)) == 440  # 1-s window -> 1-Hz bins: the tone survived resampling 22.05 -> 16 kHz
    assert media.decode_audio(clips["av"], sample_rate=8000).size == pytest.approx(x.size / 2, abs=8)


def test_frames_follow_ffmpeg_fps_1(clips):
    """4 fps, frame i at i/4 s: tick t takes the last frame whose time rounds to <= t, i.e. i = 4t + 1."""
    frames, padded = media.frames_1fps(clips["av"])
    assert frames.shape == (5, 48, 64, 3) and frames.dtype == np.uint8 and padded == 0
    assert grey_index(frames) == [1, 5, 9, 13, 17]
    frames, padded = media.frames_1fps(clips["av"], num_seconds=7)  # frame 19 (4.75 s) owns tick 5; tick 6 is padding
    assert grey_index(frames) == [1, 5, 9, 13, 17, 19, 19] and padded == 1
    frames, padded = media.frames_1fps(clips["av"], num_seconds=2)
    assert grey_index(frames) == [1, 5] and padded == 0
    assert media.frames_1fps(clips["av"], num_seconds=0)[0].shape == (0, 48, 64, 3)


def _libavfilter_fps1(path: Path) -> list[int]:
    """Reference: ffmpeg's own fps=1 filter (libavfilter, through PyAV), stream starting at 0."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        graph = av.filter.Graph()
        src, fps, sink = graph.add_buffer(template=s), graph.add("fps", "fps=1"), graph.add("buffersink")
        src.link_to(fps)
        fps.link_to(sink)
        graph.configure()
        out = []

        def drain():
            while True:
                try:
                    out.append(graph.pull().to_ndarray(format="rgb24"))
                except (av.error.BlockingIOError, av.error.EOFError):
                    return

        for frame in c.decode(s):
            graph.push(frame)
            drain()
        graph.push(None)
        drain()
    return grey_index(np.stack(out))


@pytest.mark.parametrize("fps", [Fraction(30000, 1001), 25, 3, Fraction(1, 2)])
def test_frames_match_libavfilter_fps(tmp_path, fps):
    path = make_clip(tmp_path / "v.mp4", seconds=6 if fps != Fraction(1, 2) else 10, fps=fps, audio_rate=None)
    frames, _ = media.frames_1fps(path)
    ref = _libavfilter_fps1(path)
    assert grey_index(frames) == ref[: len(frames)] and len(frames) == int(media.probe(path).duration)


def test_leading_gap_is_padded(tmp_path):
    """Video frames at 1.5, 2.0, 2.5, 3.0 s ... (audio from 0): frame 0 rounds to tick 2, so ticks 0 and 1 repeat it;
    tick 2 takes frame 1 (2.0 s), tick 3 frame 3 (3.0 s; 2.5 s rounds half away from zero to 3)."""
    path = make_clip(tmp_path / "late.mp4", seconds=3, fps=2, first_pts=3)
    frames, padded = media.frames_1fps(path, num_seconds=4)
    assert grey_index(frames) == [0, 0, 1, 3] and padded == 2


@pytest.mark.parametrize("name", ["trunc_av", "random", "empty"])
def test_unreadable_files(clips, name):
    for fn in (media.probe, media.decode_audio, media.frames_1fps):
        with pytest.raises(MediaError) as err:
            fn(clips[name])
        assert err.value.reason == "video_unreadable"


def test_truncated_faststart_file_fails_on_decoding(clips):
    assert media.probe(clips["trunc_avf"]).duration == pytest.approx(5.0, abs=0.1)  # the header is intact
    for fn in (media.decode_audio, media.frames_1fps):
        with pytest.raises(MediaError) as err:
            fn(clips["trunc_avf"])
        assert err.value.reason == "video_unreadable"


def _corrupt(src: Path, dst: Path, spans: list[tuple[int, int]]) -> Path:
    data, rng = bytearray(src.read_bytes()), np.random.default_rng(1)
    for start, length in spans:
        data[start:start + length] = rng.bytes(length)
    dst.write_bytes(bytes(data))
    return dst


def test_a_few_broken_packets_are_skipped_like_ffmpeg(clips, tmp_path):
    """300 random bytes inside the media data: the damaged packets are dropped, the rest decodes."""
    size = clips["av"].stat().st_size
    path = _corrupt(clips["av"], tmp_path / "damaged.mp4", [(size // 3, 300)])
    assert abs(media.decode_audio(path).size - media.decode_audio(clips["av"]).size) <= 4 * 1024
    assert media.frames_1fps(path)[0].shape == (5, 48, 64, 3)


def test_heavily_corrupted_file_is_unreadable(tmp_path):
    """400 random bytes every 1.5 KB of an H.264 + AAC sample (its index is at the start: faststart)."""
    src = SAMPLES / "smpl_asr_tea.mp4"
    size = src.stat().st_size
    path = _corrupt(src, tmp_path / "heavy.mp4", [(k, 400) for k in range(size // 10, size, 1500)])
    for fn in (media.decode_audio, media.frames_1fps):
        with pytest.raises(MediaError, match="failed to decode") as err:
            fn(path)
        assert err.value.reason == "video_unreadable"


def test_no_audio_stream(clips):
    with pytest.raises(MediaError) as err:
        media.decode_audio(clips["noaudio"])
    assert err.value.reason == "no_audio" and "no audio stream" in err.value.detail
    assert media.frames_1fps(clips["noaudio"])[0].shape[0] == 5


def test_size_and_duration_caps(clips, tmp_path):
    with pytest.raises(MediaError, match="cap") as err:
        media.probe(clips["av"], max_bytes=1000)
    assert err.value.reason == "video_unreadable"
    with pytest.raises(MediaError, match="cap"):
        media.decode_audio(clips["av"], max_seconds=2.0)
    with pytest.raises(MediaError):
        media.probe(tmp_path / "missing.mp4")
    e = pickle.loads(pickle.dumps(MediaError("no_audio", "x")))
    assert (e.reason, e.detail) == ("no_audio", "x")


def test_committed_samples_are_small_and_readable():
    spoken = json.loads((SAMPLES / "SPOKEN.json").read_text())
    assert sorted(media.find_media(SAMPLES)) == sorted(spoken) == ["smpl_asr_omelette", "smpl_asr_tea"]
    for vid, path in media.find_media(SAMPLES).items():
        assert path.stat().st_size < 400_000
        info = media.probe(path)
        assert info.has_audio and info.has_video and (info.width, info.height) == (160, 120)
        assert 20 <= info.duration <= 35 and 5 <= spoken[vid].count(".") <= 8
