"""The report's distributions, aggregated while streaming (docs/architecture.md, "The release step"): a ``Tally`` holds
counts of distinct (rounded) values, never the values, and ``ReportTallies`` the four distributions of the build
report (``builders.release.report``), folded video by video or merged per work shard.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ReportTallies", "Tally"]


def _words(text: Any) -> int:
    return len(str(text or "").split())


class Tally:
    """Numbers seen one at a time, summarised in memory bounded by the number of distinct (rounded) values.

    ``n``, ``mean``, ``std`` (ddof=0), ``min`` and ``max`` are exact. Quantiles and free-binned histograms come from
    counts per value: exact with ``resolution=None`` (for integers: counts, words, steps); with a ``resolution``
    (scores, seconds) exact too until more than ``exact_limit`` distinct values were seen, then per multiple of
    ``resolution`` (memory bounded by the value range over the resolution). ``bins=(k, lo, hi)`` also counts
    ``np.histogram(np.clip(x, lo, hi), k, range=(lo, hi))`` exactly. ``None`` and non-finite values are skipped.
    Values are buffered and folded in with numpy ``buffer`` at a time.
    """

    def __init__(self, resolution: float | None = None, bins: tuple[int, float, float] | None = None,
                 buffer: int = 1 << 16, exact_limit: int = 100_000) -> None:
        self.resolution = resolution
        self.bins = bins
        self._exact = True
        self._limit = exact_limit
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._counts: dict[float, int] = {}
        self._hist = [0] * bins[0] if bins else []
        self._buf: list[float] = []
        self._size = buffer

    def add(self, x: Any) -> None:
        if x is None:
            return
        x = float(x)
        if math.isfinite(x):
            self._buf.append(x)
            if len(self._buf) >= self._size:
                self._flush()

    def extend(self, xs: Iterable[Any]) -> None:
        for x in xs:
            self.add(x)

    def _flush(self) -> None:
        if not self._buf:
            return
        import numpy as np

        a = np.asarray(self._buf, dtype=np.float64)
        self._buf = []
        k, mean_b = a.size, float(a.mean())
        m2_b = float(((a - mean_b) ** 2).sum())
        n = self._n + k
        delta = mean_b - self._mean
        self._mean += delta * k / n
        self._m2 += m2_b + delta * delta * self._n * k / n
        self._n = n
        self._min, self._max = min(self._min, float(a.min())), max(self._max, float(a.max()))
        for v, c in zip(*np.unique(a if self._exact else self._round(a), return_counts=True)):
            self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        if self._exact and self.resolution is not None and len(self._counts) > self._limit:
            self._exact = False
            keys, counts = self.values()
            self._counts = {}
            for v, c in zip(self._round(keys), counts):
                self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        if self.bins:
            bins, lo, hi = self.bins
            counts, _ = np.histogram(np.clip(a, lo, hi), bins=bins, range=(lo, hi))
            self._hist = [h + int(c) for h, c in zip(self._hist, counts)]
        self.__dict__.pop("_sorted", None)  # the counts changed: values() sorts them again

    def merge(self, other: Tally) -> Tally:
        """Fold in the values ``other`` saw (same ``resolution`` and ``bins``), as if added here: exact counts, Chan et
        al.'s pairwise update of the mean and the sum of squares. Returns ``self``."""
        if (other.resolution, other.bins) != (self.resolution, self.bins):
            raise ValueError(f"cannot merge a Tally of {other.resolution, other.bins} into one of "
                             f"{self.resolution, self.bins}")
        self._flush()
        other._flush()
        if not other._n:
            return self
        n = self._n + other._n
        delta = other._mean - self._mean
        self._mean += delta * other._n / n
        self._m2 += other._m2 + delta * delta * self._n * other._n / n
        self._n = n
        self._min, self._max = min(self._min, other._min), max(self._max, other._max)
        counts = other._counts
        if self._exact and not other._exact:
            self._exact = False
            keys, cs = self.values()
            self._counts = {}
            for v, c in zip(self._round(keys), cs):
                self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        if not self._exact and other._exact and counts:
            import numpy as np

            keys = np.asarray(list(counts), dtype=np.float64)
            counts = {}
            for v, c in zip(self._round(keys), other._counts.values()):
                counts[float(v)] = counts.get(float(v), 0) + int(c)
        for v, c in counts.items():
            self._counts[v] = self._counts.get(v, 0) + c
        if self._exact and self.resolution is not None and len(self._counts) > self._limit:
            self._exact = False
            keys, cs = self.values()
            self._counts = {}
            for v, c in zip(self._round(keys), cs):
                self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        self._hist = [a + b for a, b in zip(self._hist, other._hist)]
        self.__dict__.pop("_sorted", None)  # the counts changed: values() sorts them again
        return self

    def compact(self) -> Tally:
        """Fold the buffered values in now (what the first read or merge would do, with the same result): a Tally
        kept on disk (a cached partial, ``builders.release.parts.scan_partials``) is then merged without numpy work.
        Returns ``self``."""
        self._flush()
        return self

    def _round(self, a: Any) -> Any:
        """Values to the nearest multiple of ``resolution``, written with its decimals (0.3356, not 0.33560000000001)."""
        import numpy as np

        decimals = max(0, -math.floor(math.log10(self.resolution)))
        return np.round(np.round(a / self.resolution) * self.resolution, decimals)

    def _done(self) -> Tally:
        self._flush()
        return self

    @property
    def n(self) -> int:
        """How many values were added."""
        return self._done()._n

    @property
    def mean(self) -> float | None:
        return self._done()._mean if self.n else None

    @property
    def std(self) -> float | None:
        return math.sqrt(self._done()._m2 / self.n) if self.n else None

    @property
    def min(self) -> float | None:
        return self._done()._min if self.n else None

    @property
    def max(self) -> float | None:
        return self._done()._max if self.n else None

    def values(self) -> tuple[Any, Any]:
        """The distinct (rounded) values in increasing order and their counts, as numpy arrays."""
        import numpy as np

        if self._buf:
            self._flush()
        # the sorted arrays are kept for the next quantile until the counts change (_flush and merge drop them; the
        # state is checked too); callers only read them
        state = (self._n, self._exact, len(self._counts))
        cached = self.__dict__.get("_sorted")
        if cached is not None and cached[0] == state:
            return cached[1], cached[2]
        keys = sorted(self._counts)
        out = np.asarray(keys, dtype=np.float64), np.asarray([self._counts[k] for k in keys], dtype=np.int64)
        self._sorted = (state, *out)
        return out

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (0..1) with numpy's default linear interpolation between order statistics."""
        import numpy as np

        vals, counts = self.values()
        if not self.n:
            return None
        cum = np.cumsum(counts)
        h = (self.n - 1) * q
        i = math.floor(h)
        lo = float(vals[int(np.searchsorted(cum, i, side="right"))])
        hi = float(vals[int(np.searchsorted(cum, min(i + 1, self.n - 1), side="right"))])
        t = h - i
        return hi - (hi - lo) * (1 - t) if t >= 0.5 else lo + (hi - lo) * t  # numpy's _lerp, to the last bit

    @property
    def median(self) -> float | None:
        return self.quantile(0.5)

    def histogram(self) -> dict[str, list[float]]:
        """The exact fixed-bin histogram of ``bins``: ``{"edges": [...], "counts": [...]}``."""
        import numpy as np

        if not self.bins:
            raise ValueError("this Tally has no fixed bins")
        self._flush()
        bins, lo, hi = self.bins
        return {"edges": [float(e) for e in np.histogram_bin_edges([], bins=bins, range=(lo, hi))],
                "counts": list(self._hist)}


class ReportTallies:
    """The report's distributions of the kept data, aggregated video by video (see ``report.render_report``).

    A video is a mapping with ``duration`` and ``segments`` (each with ``start``, ``end``, ``text``).
    """

    def __init__(self) -> None:
        self.videos = 0
        self.segments_per_video = Tally()
        self.words_per_step = Tally()
        self.segment_durations = Tally(resolution=0.01)
        self.video_durations = Tally(resolution=0.1)

    def add(self, video: Mapping[str, Any]) -> None:
        self.videos += 1
        segs = video.get("segments") or []
        self.segments_per_video.add(len(segs))
        for s in segs:
            self.words_per_step.add(_words(s.get("text")))
            if s.get("end") is not None and s.get("start") is not None:
                self.segment_durations.add(float(s["end"]) - float(s["start"]))
        if video.get("duration") is not None:
            self.video_durations.add(float(video["duration"]))

    def merge(self, other: ReportTallies) -> ReportTallies:
        """Fold in another part's tallies (``Tally.merge``); returns ``self``."""
        self.videos += other.videos
        for name in ("segments_per_video", "words_per_step", "segment_durations", "video_durations"):
            getattr(self, name).merge(getattr(other, name))
        return self

    def compact(self) -> ReportTallies:
        """``Tally.compact`` of every distribution; returns ``self``."""
        for name in ("segments_per_video", "words_per_step", "segment_durations", "video_durations"):
            getattr(self, name).compact()
        return self

    @classmethod
    def of(cls, videos: Iterable[Mapping[str, Any]]) -> ReportTallies:
        out = cls()
        for v in videos:
            out.add(v)
        return out
