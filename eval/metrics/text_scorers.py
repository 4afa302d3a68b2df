"""Sentence scorers of the dense-captioning metrics: the pycocoevalcap 1.2 tokenizer, METEOR, BLEU-4 and CIDEr-D.

docs/evaluation.md: text passes ``remove_nonascii`` (non-ASCII -> space), then the Stanford
PTB tokenizer shipped in pycocoevalcap (Java, lower-cases, punctuation tokens dropped); METEOR 1.5 runs as the jar of
pycocoevalcap (``-l en -norm``) in one JVM per run; BLEU and CIDEr are pycocoevalcap's pure-Python scorers.

Two deliberate differences from calling pycocoevalcap's wrappers the way the reference evaluators do, both
value-preserving:

- **Context-free tokenization** (docs/evaluation.md, Dense-captioning text metrics): pycocoevalcap tokenizes a batch of
  sentences as the lines of one file, and the PTB tokenizer looks ahead across lines (a line ending in "C." keeps "c."
  before a lower-case line and splits off the period before an upper-case one). Here every sentence is followed by a
  neutral lower-case line, so its tokens never depend on which sentence comes next; the result equals the reference's
  whenever the reference's next line starts in lower case, and makes the toolkit deterministic.
- **Pipelined METEOR**: the same jar and the same ``SCORE``/``EVAL`` protocol as ``pycocoevalcap.meteor.Meteor``, but
  all requests are written by a feeder thread while the answers are read, and identical requests are answered from a
  cache (the same pair recurs across the four tIoU thresholds).

Tests inject :class:`PlainTokenizer` and a scoring function instead (docs/evaluation.md).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from eval.registry import EvalError

#: punctuation tokens that pycocoevalcap's PTBTokenizer drops (pycocoevalcap 1.2 ``tokenizer/ptbtokenizer.py``)
PTB_PUNCTUATIONS = frozenset(
    ["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-", "--", "...", ";"]
)
#: the line put after every sentence so that the PTB tokenizer's look-ahead sees a lower-case word (docs/evaluation.md)
NEUTRAL_LINE = "x"


def remove_nonascii(text: str) -> str:
    """Non-ASCII characters become spaces, as the ActivityNet and SODA evaluators do before tokenizing."""
    return "".join(ch if ord(ch) < 128 else " " for ch in text)


class Tokenizer(Protocol):
    def tokenize(self, sentences: Sequence[str]) -> list[str]: ...


def tokenize_blocks(tokenizer: Tokenizer, blocks: Sequence[Sequence[str]]) -> list[list[str]]:
    """Tokenize blocks of lines: each line sees the next line of its block as context, and the last line of a block
    sees only the neutral line (``PtbTokenizer`` does this natively; context-free tokenizers ignore blocks)."""
    native = getattr(tokenizer, "tokenize_blocks", None)
    if native is not None:
        return native(blocks)
    flat = tokenizer.tokenize([s for b in blocks for s in b])
    out, k = [], 0
    for b in blocks:
        out.append(flat[k : k + len(b)])
        k += len(b)
    return out


class SentenceScorer(Protocol):
    """What the dense-captioning metrics need from a text scorer (tokenized inputs)."""

    def tokenize(self, sentences: Sequence[str]) -> list[str]: ...

    def meteor_aggregate(self, groups: Sequence[Sequence[tuple[str, str]]]) -> list[float]:
        """Per group of (hypothesis, reference) pairs, METEOR's aggregate score over the group (0 for an empty group)."""
        ...

    def meteor_single(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Per (hypothesis, reference) pair, its own METEOR score."""
        ...


def _pycocoevalcap_dir() -> Path:
    try:
        import pycocoevalcap
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise EvalError("the dense-captioning metrics need pycocoevalcap==1.2 (pip install pycocoevalcap==1.2)") from exc
    paths = list(getattr(pycocoevalcap, "__path__", []))
    if not paths:  # pragma: no cover
        raise EvalError("cannot locate the pycocoevalcap package folder")
    return Path(paths[0])


def java_executable() -> str:
    java = shutil.which("java")
    if java is None:
        raise EvalError(
            "the dense-captioning text metrics run pycocoevalcap's Java scorers, but `java` is not on PATH "
            "(install a JRE, e.g. `apt-get install default-jre-headless`)"
        )
    return java


class PlainTokenizer:
    """Java-free tokenizer for tests: ``remove_nonascii``-ed text lower-cased, split on whitespace, PTB punctuation
    tokens dropped (docs/evaluation.md note on offline scorers). Not the reference tokenizer."""

    def tokenize(self, sentences: Sequence[str]) -> list[str]:
        return [" ".join(w for w in s.lower().split() if w not in PTB_PUNCTUATIONS) for s in sentences]


class PtbTokenizer:
    """pycocoevalcap's Stanford PTB tokenizer (``-preserveLines -lowerCase``), one JVM per call, without cross-line
    context: every sentence is followed by :data:`NEUTRAL_LINE` (module docstring)."""

    def __init__(self) -> None:
        self.jar = _pycocoevalcap_dir() / "tokenizer" / "stanford-corenlp-3.4.1.jar"
        if not self.jar.is_file():
            raise EvalError(f"pycocoevalcap's tokenizer jar is missing: {self.jar}")

    def tokenize(self, sentences: Sequence[str]) -> list[str]:
        """Each sentence on its own: no cross-line context at all."""
        return [b[0] for b in self.tokenize_blocks([[s] for s in sentences])]

    def tokenize_blocks(self, blocks: Sequence[Sequence[str]]) -> list[list[str]]:
        """One JVM call; within a block each line has the next line as context (as in the reference's batch), and
        every block ends with :data:`NEUTRAL_LINE`, so a block's tokens never depend on the other blocks."""
        lines: list[str] = []
        ends: list[int] = []
        for block in blocks:
            for s in block:
                lines.append(s.replace("\n", " ").replace("\r", " "))
            lines.append(NEUTRAL_LINE)
            ends.append(len(lines) - 1)
        if not ends:
            return []
        with tempfile.TemporaryDirectory(prefix="ptb-") as tmp:
            path = Path(tmp) / "sentences.txt"
            path.write_text("\n".join(lines), encoding="utf-8")
            proc = subprocess.run(
                [java_executable(), "-cp", str(self.jar), "edu.stanford.nlp.process.PTBTokenizer",
                 "-preserveLines", "-lowerCase", str(path)],
                capture_output=True,
                check=False,
            )
        if proc.returncode != 0:
            raise EvalError(f"the PTB tokenizer failed (exit {proc.returncode}): {proc.stderr.decode()[-500:]}")
        out_lines = proc.stdout.decode("utf-8").split("\n")
        if len(out_lines) < len(lines):
            raise EvalError(f"the PTB tokenizer returned {len(out_lines)} lines for {len(lines)}")
        out: list[list[str]] = []
        start = 0
        for end in ends:
            if out_lines[end].strip() != NEUTRAL_LINE:
                raise EvalError(f"the PTB tokenizer output is misaligned at line {end} ({out_lines[end]!r})")
            out.append([" ".join(w for w in line.rstrip().split(" ") if w not in PTB_PUNCTUATIONS)
                        for line in out_lines[start:end]])
            start = end + 1
        return out


class MeteorJar:
    """METEOR 1.5 from pycocoevalcap's jar, the command line of ``pycocoevalcap.meteor.Meteor`` (``-Xmx2G``,
    ``-l en -norm``), started once and kept for the whole run; requests are pipelined and cached."""

    def __init__(self) -> None:
        meteor_dir = _pycocoevalcap_dir() / "meteor"
        if not (meteor_dir / "meteor-1.5.jar").is_file():
            raise EvalError(f"pycocoevalcap's METEOR jar is missing in {meteor_dir}")
        self._proc = subprocess.Popen(
            [java_executable(), "-jar", "-Xmx2G", "meteor-1.5.jar", "-", "-", "-stdio", "-l", "en", "-norm"],
            cwd=meteor_dir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._stats: dict[tuple[str, str], str] = {}
        self._evals: dict[tuple[str, ...], tuple[list[float], float]] = {}
        self._lock = threading.Lock()

    # -- the jar protocol -------------------------------------------------------------------------------------------
    def _exchange(self, requests: list[str], replies_per_request: list[int]) -> list[list[str]]:
        """Write every request line (feeder thread) while reading the expected number of reply lines per request."""
        proc = self._proc
        if proc.poll() is not None:
            raise EvalError(f"the METEOR JVM exited with status {proc.returncode}")
        assert proc.stdin is not None and proc.stdout is not None
        error: list[BaseException] = []

        def feed() -> None:
            try:
                for line in requests:
                    proc.stdin.write((line + "\n").encode("utf-8"))
                proc.stdin.flush()
            except BaseException as exc:  # noqa: BLE001 - reported below
                error.append(exc)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        replies: list[list[str]] = []
        for n in replies_per_request:
            got = []
            for _ in range(n):
                line = proc.stdout.readline()
                if not line:
                    feeder.join(timeout=1)
                    raise EvalError(f"the METEOR JVM stopped answering ({error[0] if error else 'end of output'})")
                got.append(line.decode("utf-8").strip())
            replies.append(got)
        feeder.join()
        if error:
            raise EvalError(f"writing to the METEOR JVM failed: {error[0]}")
        return replies

    @staticmethod
    def _score_line(hypothesis: str, reference: str) -> str:
        # pycocoevalcap Meteor._stat: SCORE ||| reference ||| hypothesis, '|||' removed from the hypothesis
        hypothesis = hypothesis.replace("|||", "").replace("  ", " ")
        return f"SCORE ||| {reference} ||| {hypothesis}"

    def stats(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """METEOR sufficient statistics of each (hypothesis, reference) pair (cached)."""
        with self._lock:
            todo = list(dict.fromkeys(p for p in pairs if p not in self._stats))
            if todo:
                replies = self._exchange([self._score_line(h, r) for h, r in todo], [1] * len(todo))
                for pair, (line,) in zip(todo, replies):
                    self._stats[pair] = line
            return [self._stats[p] for p in pairs]

    def evaluate(self, stat_groups: Sequence[Sequence[str]]) -> list[tuple[list[float], float]]:
        """Per group of statistics lines: (per-segment scores, aggregate score), as ``EVAL ||| s1 ||| s2 ...``."""
        with self._lock:
            keys = [tuple(g) for g in stat_groups]
            todo = list(dict.fromkeys(k for k in keys if k and k not in self._evals))
            if todo:
                lines = ["EVAL" + "".join(" ||| " + s for s in k) for k in todo]
                replies = self._exchange(lines, [len(k) + 1 for k in todo])
                for key, reply in zip(todo, replies):
                    try:
                        values = [float(x) for x in reply]
                    except ValueError:
                        raise EvalError(f"the METEOR JVM answered {reply!r}") from None
                    self._evals[key] = (values[:-1], values[-1])
            return [self._evals[k] if k else ([], 0.0) for k in keys]

    def close(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()
            except OSError:
                pass
            proc.kill()
            proc.wait()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


class CocoScorer:
    """The reference sentence scorer: PTB tokenizer + METEOR 1.5 (Java), started lazily, one METEOR JVM per run."""

    def __init__(self) -> None:
        self._tokenizer = PtbTokenizer()
        self._meteor: MeteorJar | None = None

    @property
    def meteor(self) -> MeteorJar:
        if self._meteor is None:
            self._meteor = MeteorJar()
        return self._meteor

    def tokenize(self, sentences: Sequence[str]) -> list[str]:
        return self._tokenizer.tokenize(sentences)

    def tokenize_blocks(self, blocks: Sequence[Sequence[str]]) -> list[list[str]]:
        return tokenize_blocks(self._tokenizer, blocks)

    def meteor_aggregate(self, groups: Sequence[Sequence[tuple[str, str]]]) -> list[float]:
        flat = [p for g in groups for p in g]
        stats = iter(self.meteor.stats(flat))
        stat_groups = [[next(stats) for _ in g] for g in groups]
        return [agg for _, agg in self.meteor.evaluate(stat_groups)]

    def meteor_single(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        unique = list(dict.fromkeys(pairs))
        stats = self.meteor.stats(unique)
        # one EVAL line per chunk; the per-segment scores do not depend on the other segments of the line
        chunk = 512
        scores: dict[tuple[str, str], float] = {}
        groups = [stats[i : i + chunk] for i in range(0, len(stats), chunk)]
        for gi, (segment_scores, _) in enumerate(self.meteor.evaluate(groups)):
            for pair, score in zip(unique[gi * chunk : (gi + 1) * chunk], segment_scores):
                scores[pair] = score
        return [scores[p] for p in pairs]

    def close(self) -> None:
        if self._meteor is not None:
            self._meteor.close()
            self._meteor = None


class FunctionScorer:
    """An injected scorer (tests, or a user's own metric): a tokenizer plus ``score(hypothesis, reference)``.

    ``meteor_single`` applies the function per pair; ``meteor_aggregate`` is the mean over the group (METEOR's own
    aggregate is not a mean, so densevid METEOR values from this scorer are not the reference's).
    """

    def __init__(self, score: Callable[[str, str], float], tokenizer: Tokenizer | None = None) -> None:
        self._score = score
        self._tokenizer = tokenizer or PlainTokenizer()

    def tokenize(self, sentences: Sequence[str]) -> list[str]:
        return self._tokenizer.tokenize(sentences)

    def tokenize_blocks(self, blocks: Sequence[Sequence[str]]) -> list[list[str]]:
        return tokenize_blocks(self._tokenizer, blocks)

    def meteor_aggregate(self, groups: Sequence[Sequence[tuple[str, str]]]) -> list[float]:
        return [sum(self._score(h, r) for h, r in g) / len(g) if g else 0.0 for g in groups]

    def meteor_single(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [float(self._score(h, r)) for h, r in pairs]

    def close(self) -> None:
        pass


def _add_pairs(scorer: object, pairs: Iterable[tuple[str, str]]) -> int:
    """Feed (hypothesis, reference) pairs to a pycocoevalcap scorer (one reference each); returns how many."""
    n = 0
    for hyp, ref in pairs:
        scorer += (hyp, [ref])  # type: ignore[operator]
        n += 1
    return n


def bleu4(pairs: Iterable[tuple[str, str]]) -> float:
    """Corpus-level BLEU-4 of the (hypothesis, reference) pairs (pycocoevalcap ``Bleu(4)``, index 3, 'closest')."""
    from pycocoevalcap.bleu.bleu_scorer import BleuScorer

    scorer = BleuScorer(n=4)
    if not _add_pairs(scorer, pairs):
        return 0.0
    score, _ = scorer.compute_score(option="closest", verbose=0)
    return float(score[3])


def cider_d(pairs: Iterable[tuple[str, str]]) -> float:
    """CIDEr-D of the pairs with document frequencies from these pairs' references only (pycocoevalcap ``Cider``)."""
    from pycocoevalcap.cider.cider_scorer import CiderScorer

    scorer = CiderScorer(n=4, sigma=6.0)
    if not _add_pairs(scorer, pairs):
        return 0.0
    score, _ = scorer.compute_score()
    return float(score)


def default_scorer() -> CocoScorer:
    """The reference scorer; its construction checks that Java and the jars are there (clear error otherwise)."""
    java_executable()
    return CocoScorer()


__all__ = [
    "CocoScorer",
    "FunctionScorer",
    "MeteorJar",
    "PlainTokenizer",
    "PtbTokenizer",
    "SentenceScorer",
    "bleu4",
    "cider_d",
    "default_scorer",
    "remove_nonascii",
    "tokenize_blocks",
]
