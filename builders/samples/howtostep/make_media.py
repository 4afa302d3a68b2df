"""Make the two sample videos of ``videos/`` (spoken how-to procedures for the ASR path, spec ``howtostep.md`` §2.3).

Project-written text, spoken by espeak-ng (voice ``en-us``), muxed with PyAV into small mp4 files: H.264 160x120 at
4 fps (one background colour per sentence plus a moving square) and AAC 16 kHz mono. ``videos/SPOKEN.json`` records the
exact spoken text per video id (the reference of the ASR word-error-rate test). Committed for reproducibility; tests
never run it (espeak-ng is not installed in CI). Usage: ``python make_media.py [out_dir]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

SCRIPTS = {
    "smpl_asr_tea": [
        "First, fill the kettle with fresh cold water and bring it to a boil.",
        "Warm the teapot by rinsing it with a little hot water.",
        "Put one teaspoon of black tea leaves in the pot for each cup.",
        "Pour the boiling water over the leaves and close the lid.",
        "Let the tea steep for four minutes.",
        "Strain the tea into your cup and add milk or sugar if you like.",
    ],
    "smpl_asr_omelette": [
        "First, crack three eggs into a bowl and add a pinch of salt.",
        "Beat the eggs with a fork until they are smooth.",
        "Next, melt a small piece of butter in a frying pan over medium heat.",
        "Pour the eggs into the pan and let them set for a minute.",
        "Then sprinkle grated cheese over one half of the omelette.",
        "Fold the omelette in half with a spatula.",
        "Finally, slide it onto a warm plate and serve right away.",
    ],
}
RATE, FPS, WIDTH, HEIGHT = 16000, 4, 160, 120
GAP_S, LEAD_S = 0.6, 0.5          # silence between sentences and before the first one
WPM = 150                          # espeak-ng speed (words per minute): a little slower than its 175 default
COLOURS = [(200, 80, 60), (60, 160, 90), (70, 90, 190), (210, 180, 60), (150, 70, 170), (60, 170, 180),
           (120, 120, 120)]


def speak(text: str, tmp: Path) -> np.ndarray:
    """espeak-ng -> float32 mono at 16 kHz (espeak writes 22050 Hz 16-bit mono; resampled with PyAV)."""
    import av

    wav = tmp / "s.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", str(WPM), "-w", str(wav), text], check=True)
    with wave.open(str(wav)) as w:
        sr, pcm = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), np.int16)
    frame = av.AudioFrame.from_ndarray(pcm[None, :].copy(), format="s16", layout="mono")
    frame.sample_rate = sr
    resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
    chunks = [f.to_ndarray().reshape(-1) for f in resampler.resample(frame) + resampler.resample(None)]
    return np.concatenate(chunks).astype(np.float32)


def make_video(vid: str, sentences: list[str], out: Path, tmp: Path) -> dict:
    """Write ``out/<vid>.mp4``; return the sentence times (for the README)."""
    import av

    pieces, times, t = [np.zeros(int(LEAD_S * RATE), np.float32)], [], LEAD_S
    for s in sentences:
        x = speak(s, tmp)
        times.append((round(t, 2), round(t + x.size / RATE, 2)))
        pieces += [x, np.zeros(int(GAP_S * RATE), np.float32)]
        t += x.size / RATE + GAP_S
    audio = np.concatenate(pieces)
    n_frames = int(np.ceil(audio.size / RATE * FPS))
    path = out / f"{vid}.mp4"
    with av.open(str(path), "w", options={"movflags": "faststart"}) as c:
        v = c.add_stream("libx264", rate=FPS, options={"crf": "30", "preset": "veryslow", "threads": "1"})
        v.width, v.height, v.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        a = c.add_stream("aac", rate=RATE, options={"b": "24k"})
        a.layout = "mono"
        size, done = a.codec_context.frame_size or 1024, 0
        for i in range(n_frames):  # interleave: each video frame, then the audio up to its end time
            sec = i / FPS
            k = sum(1 for start, _ in times if start <= sec) - 1
            img = np.empty((HEIGHT, WIDTH, 3), np.uint8)
            img[:] = COLOURS[max(k, 0) % len(COLOURS)]
            x0 = int((i * 6) % (WIDTH - 20))
            img[50:70, x0:x0 + 20] = 255
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            c.mux(v.encode(frame))
            while done < min(audio.size, int((i + 1) * RATE / FPS)):
                chunk = audio[None, done:done + size].copy()
                frame = av.AudioFrame.from_ndarray(chunk, format="flt", layout="mono")
                frame.sample_rate, frame.pts = RATE, done
                c.mux(a.encode(frame))
                done += chunk.shape[1]
        c.mux(v.encode())
        c.mux(a.encode())
    return {"duration_s": round(audio.size / RATE, 2), "sentences": times, "bytes": path.stat().st_size}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    spoken = {}
    with tempfile.TemporaryDirectory() as d:
        for vid, sentences in SCRIPTS.items():
            print(vid, make_video(vid, sentences, out, Path(d)))
            spoken[vid] = " ".join(sentences)
    (out / "SPOKEN.json").write_text(json.dumps(spoken, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "videos")
