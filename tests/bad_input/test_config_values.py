"""Config values that pass the type check and would change results silently (issue 20; docs/configuration.md).

Every number is checked against its range when the config is read, before any work, with one line naming the key
and exit 2: NaN and infinities (from ``--set``, a ``--config`` YAML file, inside a list or an optional key), a
negative duration (``--set max_duration=-5``), a threshold outside [0, 1], a frame rate outside 1-60 (``--fps
100000`` used to drop every good video as ``video_unreadable``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import typing
from pathlib import Path

import pytest

from builders.core.config import ConfigError, apply_overrides, parse_sets, read_config_file

CORPORA = ["sieve_swap", "marc", "howtostep", "showhowto"]


def _config_class(corpus: str) -> type:
    return importlib.import_module(f"builders.corpora.{corpus}").Config


def _float_keys(cfg_cls: type) -> list[str]:
    hints = typing.get_type_hints(cfg_cls)
    return [f.name for f in dataclasses.fields(cfg_cls)
            if hints[f.name] is float or float in typing.get_args(hints[f.name])]


def _cli(corpus: str, tmp_path: Path, *args: str) -> tuple[int, list[str]]:
    """``python -m builders.build CORPUS --out TMP ARGS`` in-process: (exit code, stderr lines)."""
    from builders.build import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main([corpus, "--out", str(tmp_path / "out"), "--no-progress", "-q", *args])
    return rc, [line for line in err.getvalue().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------- the command line: exit 2
@pytest.mark.parametrize("corpus, setting, message", [
    ("showhowto", "fps=100000", "fps must be in [1, 60] (frames a second of the keyframe grid), got 100000"),
    ("showhowto", "fps=0", "fps must be in [1, 60]"),
    ("showhowto", "max_duration=-5", "max_duration must be > 0 (seconds), got -5.0"),
    ("sieve_swap", "max_duration_s=-5", "max_duration_s must be > 0 (seconds), got -5.0"),
    ("howtostep", "epsilon1=1.5", "epsilon1 must be in [0, 1]"),
    ("howtostep", "feature_duration_tolerance_s=-1", "feature_duration_tolerance_s must be >= 0"),
    ("howtostep", "feature_max_bad_share=.nan", "feature_max_bad_share: expected a finite number"),
    ("marc", "chat_threshold=2", "chat_threshold must be in [0, 1]"),
])
def test_out_of_range_value_exits_2_with_one_line(tmp_path, corpus, setting, message):
    rc, lines = _cli(corpus, tmp_path, "--set", setting)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0] == f"error: {message}" or lines[0].startswith(f"error: {message}"), lines
    assert not (tmp_path / "out").exists()  # before any work


def test_nan_in_a_config_file_exits_2_with_one_line(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("max_duration: .nan\n")
    rc, lines = _cli("showhowto", tmp_path, "--config", str(f))
    assert rc == 2 and lines == ["error: max_duration: expected a finite number, got nan"]


# ----------------------------------------------------------------------------------- NaN and infinities, anywhere
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("raw", [".nan", ".inf", "-.inf", "1e999"])
def test_every_float_key_refuses_non_finite_values_from_a_yaml_file(tmp_path, corpus, raw):
    """The path of ``--config FILE.yaml`` (read_config_file + apply_overrides, as builders/core/driver.py)."""
    cfg_cls = _config_class(corpus)
    for key in _float_keys(cfg_cls):
        f = tmp_path / f"{key}.yaml"
        f.write_text(f"{key}: {raw}\n")
        with pytest.raises(ConfigError, match=f"^{key}: expected a finite number"):
            apply_overrides(cfg_cls(), read_config_file(f))


@dataclasses.dataclass(frozen=True)
class _Nested:
    """Shapes no corpus uses today, so a future key of these types is covered too."""

    weights: list[float] = dataclasses.field(default_factory=lambda: [1.0])
    cutoff: float | None = None
    pair: tuple[float, ...] = (0.5, 0.5)
    count: int = 3
    maybe_count: int | None = None


@pytest.mark.parametrize("key, value", [
    ("weights", [1.0, float("nan")]), ("weights", "inf, 2"), ("pair", (0.1, float("-inf"))),
    ("cutoff", float("nan")), ("cutoff", "inf"),
])
def test_nested_list_and_optional_floats_refuse_non_finite_values(key, value):
    with pytest.raises(ConfigError, match=f"^{key}: expected a finite number"):
        apply_overrides(_Nested(), {key: value})


def test_float_and_list_values_through_yaml(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("weights: [0.5, .nan]\n")
    with pytest.raises(ConfigError, match="^weights: expected a finite number"):
        apply_overrides(_Nested(), read_config_file(f))
    f.write_text("weights: [0.5, 2]\ncutoff: 1e-3\n")
    cfg = apply_overrides(_Nested(), read_config_file(f))
    assert cfg.weights == [0.5, 2.0] and cfg.cutoff == 1e-3


@pytest.mark.parametrize("value, expected", [(10.0, 10), ("10", None), (10.5, None), (float("nan"), None),
                                             (float("inf"), None), (True, None)])
def test_an_integer_given_as_a_float(value, expected):
    """A YAML ``10.0`` is the integer 10; ``10.5``, NaN, infinities, a string and a bool are refused."""
    for key in ("count", "maybe_count"):
        if expected is None:
            with pytest.raises(ConfigError, match=f"^{key}: expected an integer"):
                apply_overrides(_Nested(), {key: value})
        else:
            got = apply_overrides(_Nested(), {key: value})
            assert getattr(got, key) == expected and type(getattr(got, key)) is int


def test_an_integer_key_from_the_command_line():
    from builders.corpora.howtostep.config import HowToStepConfig

    assert apply_overrides(HowToStepConfig(), parse_sets(["chunk_size=10.0"])).chunk_size == 10
    for raw in ("10.5", ".nan", ".inf"):
        with pytest.raises(ConfigError, match="^chunk_size: expected an integer"):
            apply_overrides(HowToStepConfig(), parse_sets([f"chunk_size={raw}"]))


# ------------------------------------------------------------------------------------------------------ ranges
@pytest.mark.parametrize("corpus", CORPORA)
def test_every_float_key_has_a_range(corpus):
    """No float key accepts an absurd value: each one refuses -1e9 or 1e9 (thresholds in [0, 1], cosines in
    [-1, 1], durations and margins >= 0, temperatures and rates > 0), with one line naming the key."""
    cfg_cls = _config_class(corpus)
    for key in _float_keys(cfg_cls):
        refused = 0
        for raw in ("-1e9", "1e9"):
            try:
                apply_overrides(cfg_cls(), parse_sets([f"{key}={raw}"]))
            except ConfigError as e:
                assert str(e).startswith(f"{key} must be"), str(e)
                assert "\n" not in str(e)
                refused += 1
        assert refused, f"{corpus}.{key} accepts both -1e9 and 1e9"


@pytest.mark.parametrize("corpus, key, good, bad", [
    ("howtostep", "zeta", [0.0, 0.7, 1.0], [-0.1, 1.1]),
    ("howtostep", "epsilon2", [-1.0, 0.8, 1.0], [-1.1, 1.1]),
    ("howtostep", "mptva_gamma", [0.65], [1.5]),
    ("howtostep", "nu", [0.07], [0.0, -0.1]),
    ("howtostep", "labeler_lr", [1e-4], [0.0]),
    ("howtostep", "delta_sec", [0.0, 8.0], [-1.0]),
    ("howtostep", "llm_temperature", [0.0, 0.7], [-0.5]),
    ("howtostep", "feature_max_bad_share", [0.0, 0.05, 1.0], [-0.01, 1.01]),
    ("howtostep", "feature_max_abs", [1.0, 65504.0], [0.0, 70000.0]),
    ("howtostep", "feature_transcript_span_ratio", [1.0, 3.0], [0.9]),
    ("howtostep", "feature_duration_tolerance_frac", [0.0, 0.5], [-0.1]),
    ("showhowto", "fps", [1, 5, 60], [0, 61, 100000]),
    ("showhowto", "epsilon", [0.0, 15.0], [-1.0]),
    ("showhowto", "range_tolerance", [0.0], [-0.5]),
    ("showhowto", "max_duration", [600.0], [0.0, -5.0]),
    ("sieve_swap", "merge_max_gap_s", [0.0, 4.0], [-1.0]),
    ("sieve_swap", "merge_max_dur_s", [8.0], [-8.0]),
    ("sieve_swap", "iou_threshold", [0.1], [1.5]),
    ("sieve_swap", "sim_threshold", [0.75, -1.0], [1.01]),
    ("marc", "video_ratio", [1.58], [0.0, -1.0]),
    ("marc", "max_length_ratio", [2.0, 1.0], [0.5]),
    ("marc", "title_word_quantile", [0.5], [1.5]),
])
def test_range_bounds(corpus, key, good, bad):
    cfg_cls = _config_class(corpus)
    for v in good:
        assert getattr(apply_overrides(cfg_cls(), {key: v}), key) == v
    for v in bad:
        with pytest.raises(ConfigError, match=f"^{key} must be"):
            apply_overrides(cfg_cls(), {key: v})


def test_integer_ranges():
    from builders.corpora.howtostep.config import HowToStepConfig
    from builders.corpora.marc.config import MarcConfig
    from builders.corpora.sieve_swap.config import SieveSwapConfig

    for cfg, key, bad in [(HowToStepConfig(), "rounds", 4), (HowToStepConfig(), "asr_batch_size", 0),
                          (HowToStepConfig(), "limit", 0), (SieveSwapConfig(), "encode_batch_size", 0),
                          (SieveSwapConfig(), "max_title_candidates", 0), (MarcConfig(), "min_video_sentences", 0),
                          (MarcConfig(), "max_video_sentences", 1)]:
        with pytest.raises(ConfigError, match=f"^{key} must be"):
            apply_overrides(cfg, {key: bad})


# --------------------------------------------------------------------------------------- the frame grid reader
def test_the_frame_reader_refuses_an_fps_out_of_range_instead_of_dropping_the_video(tmp_path):
    """``builders.models.media.iter_grid_frames`` raises ``ValueError`` (a caller's error), never the per-video
    ``video_unreadable``; its frame cap is 6 h of grid at the requested rate."""
    from builders.corpora.showhowto.config import FPS_RANGE
    from builders.models import media

    assert FPS_RANGE == media.GRID_FPS_RANGE
    for fps in (0, 61, 100000, 2.5, float("nan"), True):
        with pytest.raises(ValueError, match="frame grid fps"):
            next(media.iter_grid_frames(tmp_path / "none.mp4", fps=fps))
    assert media.check_grid_fps(30) == 30 and media.check_grid_fps(5.0) == 5
