"""The Python API (``builders.api``, docs/python-api.md): ``build_corpus`` builds what the CLI builds, its options are
the CLI's (one set of defaults, in ``BuildOptions``), its errors are the exceptions behind the CLI's exit codes, and
the four corpora provide the ``Corpus`` protocol."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builders.api import SETTINGS, BuildOptions, BuildOutcome, build_corpus
from builders.build import failure, main, make_parser
from builders.core.config import ConfigError
from builders.core.corpus import Corpus
from builders.core.driver import corpus_flags, resolve_config
from builders.corpora import CORPORA, UnknownCorpus, load

ROOT = Path(__file__).resolve().parents[1]

#: every flag of ``python -m builders.build <corpus>`` before the API (issue 21): none may go
BUILD_FLAGS = ("--out", "--work-dir", "--config", "--set", "--engine", "--workers", "--ray-address", "--limit",
               "--fresh", "--wait", "--gpus", "--max-error-rate", "--retry-errors", "--retries", "--shard-size",
               "--keep-generations", "--no-progress", "-q", "--quiet", "--debug", "--push", "--version", "--private",
               "--push-timeout", "--push-deadline")


# ------------------------------------------------------------------------------------------ options and the CLI


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("name", list(CORPORA))
def test_the_cli_defaults_are_the_options_defaults(name):
    """A command line with no flag gives ``BuildOptions()``: the argparse defaults are read from the dataclass."""
    options = BuildOptions.from_args(make_parser().parse_args([name]))
    assert options == BuildOptions(push_timeout=options.push_timeout, push_deadline=options.push_deadline)
    from builders.publish import DEFAULT_DEADLINE, DEFAULT_TIMEOUT   # builders.publish owns these two

    assert (options.push_timeout, options.push_deadline) == (DEFAULT_TIMEOUT, DEFAULT_DEADLINE)


@pytest.mark.parametrize("name", list(CORPORA))
def test_every_build_flag_is_kept_and_is_an_options_field(name):
    sub = _subparser(name)
    flags = {o for a in sub._actions for o in a.option_strings}
    assert set(BUILD_FLAGS) <= flags
    help_text = sub.format_help()
    assert all(flag in help_text for flag in BUILD_FLAGS)
    corpus_dests = set(corpus_flags(load(name)))
    build_dests = {a.dest for a in sub._actions} - {"help"} - corpus_dests
    fields = {f.name for f in dataclasses.fields(BuildOptions)}
    assert build_dests == fields - {"inputs"}
    assert not corpus_dests & fields, "a corpus flag may not reuse a BuildOptions field name"


def test_the_cli_fills_build_options_and_calls_the_api(tmp_path, monkeypatch):
    from builders.core import driver

    seen = []

    def run_build(corpus, options):
        seen.append((corpus.NAME, options))
        raise ConfigError("stop here")

    monkeypatch.setattr(driver, "run_build", run_build)
    rc = main(["sieve_swap", "--out", str(tmp_path), "--workers", "3", "--no-progress", "--retries", "5",
               "--set", "sim_threshold=0.8", "--set", "exclude=[a, b]", "--videos", "v.csv", "--exclude", "x.txt",
               "--limit", "4", "--keep-generations", "3", "-q"])
    assert rc == 2
    (name, options), = seen
    assert name == "sieve_swap"
    assert (options.out, options.workers, options.progress, options.retries, options.limit, options.quiet,
            options.keep_generations) == (str(tmp_path), 3, False, 5, 4, True, 3)
    assert options.sets == {"sim_threshold": 0.8, "exclude": ["a", "b"]}
    assert options.inputs == {"videos": "v.csv", "exclude": ["x.txt"]}


def test_build_corpus_signature_names_its_options():
    params = inspect.signature(build_corpus).parameters
    assert list(params)[:6] == ["corpus", "out", "work_dir", "config", "inputs", "options"]
    assert set(SETTINGS) == {f.name for f in dataclasses.fields(BuildOptions)} - {"out", "work_dir", "config",
                                                                                  "sets", "inputs"}
    assert all(name in build_corpus.__doc__ for name in SETTINGS)


def test_import_is_cheap_and_lazy():
    code = ("import sys, builders; assert 'builders.api' not in sys.modules and 'pyarrow' not in sys.modules; "
            "from builders import build_corpus, BuildOptions, BuildOutcome, Corpus; import builders.api as api; "
            "assert build_corpus is api.build_corpus; assert 'pyarrow' not in sys.modules, 'api imports pyarrow'; "
            "from builders import build, publish; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


# ------------------------------------------------------------------------------------------ the Corpus protocol


def _protocol_members() -> tuple[set[str], set[str]]:
    data = set(Corpus.__annotations__)
    methods = {n for n, v in vars(Corpus).items() if inspect.isfunction(v) and not n.startswith("_")}
    return data, methods


def test_protocol_names_what_the_driver_uses():
    data, methods = _protocol_members()
    assert data == {"NAME", "Config", "DEFAULT_SHARD_SIZE"}
    assert methods == {"add_arguments", "overrides_from_args", "resolve_inputs", "pipelines", "release"}
    source = inspect.getsource(Corpus)   # documented member by member: a #: comment or a docstring
    for name in data:
        assert re.search(rf"#: [^\n]*\n(?:    #: [^\n]*\n)*    {name}: ", source), f"{name} has no #: comment"
    for name in methods:
        assert (getattr(Corpus, name).__doc__ or "").strip(), f"{name} has no docstring"


@pytest.mark.parametrize("name", list(CORPORA))
def test_each_corpus_satisfies_the_protocol(name):
    corpus = load(name)
    assert isinstance(corpus, Corpus)
    data, methods = _protocol_members()
    for member in methods:
        fn = getattr(corpus, member)
        assert callable(fn), f"{name}.{member} is not callable"
        wanted = [p for p in inspect.signature(getattr(Corpus, member)).parameters if p != "self"]
        try:   # called as the driver calls it: one positional argument per parameter of the protocol
            inspect.signature(fn).bind(*wanted)
        except TypeError:
            pytest.fail(f"{name}.{member}{inspect.signature(fn)} cannot be called with {wanted}")
    assert corpus.NAME == name
    assert isinstance(corpus.Config, type) and dataclasses.is_dataclass(corpus.Config)
    cfg = corpus.Config()   # the paper defaults, no argument needed
    assert "limit" in {f.name for f in dataclasses.fields(cfg)}
    assert isinstance(corpus.DEFAULT_SHARD_SIZE, int) and corpus.DEFAULT_SHARD_SIZE > 0
    sample_size = getattr(corpus, "SAMPLE_SHARD_SIZE", None)
    assert sample_size is None or (isinstance(sample_size, int) and sample_size > 0)
    assert corpus.overrides_from_args(argparse.Namespace(**{
        a.dest: a.default for a in corpus_flags(corpus).values()})) == {}


# ------------------------------------------------------------------------------------------ inputs and config


_SAME = {  # corpus -> (CLI flags, the same as inputs)
    "sieve_swap": (["--videos", "v.csv", "--exclude", "a.txt", "--exclude", "b.txt"],
                   {"videos": Path("v.csv"), "exclude": ["a.txt", Path("b.txt")]}),
    "howtostep": (["--video-ids", "ids.txt", "--transcript-format", "whisperx", "--exclude", "h.txt"],
                  {"video-ids": "ids.txt", "transcript_format": "whisperx", "exclude": "h.txt"}),
    "showhowto": (["--manifest", "m.csv", "--with-images", "--min-steps", "3", "--aligner", "middle"],
                  {"manifest": "m.csv", "with_images": True, "min_steps": "3", "aligner": "middle",
                   "any_language": False}),
    "marc": (["--warc", "a.warc.gz", "--chat-model", "m.json"], {"warc": Path("a.warc.gz"), "chat-model": "m.json"}),
}


@pytest.mark.parametrize("name", list(CORPORA))
def test_inputs_mean_what_the_cli_flags_mean(name, tmp_path):
    corpus = load(name)
    flags, inputs = _SAME[name]
    config = tmp_path / "c.yaml"
    config.write_text("limit: 9\n")
    argv = [name, "--config", str(config), "--limit", "5", *flags]
    via_cli = resolve_config(corpus, make_parser().parse_args(argv))
    via_api = resolve_config(corpus, BuildOptions(config=config, limit=5, inputs=inputs))
    assert via_api == via_cli
    assert via_api.limit == 5   # --limit ranks above the config file


def test_config_mapping_ranks_above_inputs_as_set_does():
    corpus = load("sieve_swap")
    cfg = resolve_config(corpus, BuildOptions(inputs={"videos": "v.csv"}, sets={"videos": "w.csv", "limit": 3},
                                              limit=2))
    assert (cfg.videos, cfg.limit) == ("w.csv", 3)


def test_config_mapping_takes_paths(monkeypatch):
    from builders.core import driver

    seen = []
    monkeypatch.setattr(driver, "run_build", lambda corpus, options: seen.append(options))
    build_corpus("sieve_swap", out="o", config={"exclude": [Path("a.txt")], "recipes": Path("r.csv")}, quiet=True)
    assert seen[0].sets == {"exclude": ["a.txt"], "recipes": "r.csv"}
    assert resolve_config(load("sieve_swap"), seen[0]).exclude == ["a.txt"]


@pytest.mark.parametrize("call, error, message", [
    (lambda out: build_corpus("no_such_corpus", out=out), UnknownCorpus, "unknown corpus 'no_such_corpus'"),
    (lambda out: build_corpus("marc", out=out, config={"no_such_key": 1}), ConfigError, "unknown config key"),
    (lambda out: build_corpus("marc", out=out, config={"text_match": "high"}), ConfigError, "text_match"),
    (lambda out: build_corpus("marc", out=out, inputs={"recipes": "r.csv"}), ConfigError, "unknown input 'recipes'"),
    (lambda out: build_corpus("showhowto", out=out, inputs={"aligner": "best"}), ConfigError, "is not one of"),
    (lambda out: build_corpus("showhowto", out=out, inputs={"with_images": "yes"}), ConfigError, "switch"),
    (lambda out: build_corpus("marc", out=out, engine="spark"), ConfigError, "engine must be one of"),
    (lambda out: build_corpus("marc", out=out, inputs={"warc": str(out / "none.warc.gz")}), FileNotFoundError,
     "does not exist"),
    (lambda out: build_corpus("marc", out=out, workerz=2), TypeError, "'workerz'"),
    (lambda out: build_corpus("marc"), TypeError, "out="),
    (lambda out: build_corpus("marc", out=out, config=[out / "a.yaml", out / "b.yaml"]), TypeError, "one YAML"),
])
def test_errors_are_raised_before_any_work(tmp_path, call, error, message):
    out = tmp_path / "out"
    with pytest.raises(error, match=re.escape(message)):
        call(out)
    assert not out.exists()


def test_api_errors_are_the_clis_exit_2(tmp_path, capsys):
    for exc in (UnknownCorpus("unknown corpus 'x'"), ConfigError("unknown config key(s)")):
        assert failure(exc)[0] == 2
    assert isinstance(UnknownCorpus("x"), KeyError) and str(UnknownCorpus("unknown x")) == "unknown x"
    assert main(["marc", "--out", str(tmp_path), "--set", "no_such_key=1"]) == 2
    assert "unknown config key" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:   # an unknown corpus on the command line: argparse's exit 2
        main(["no_such_corpus"])
    assert e.value.code == 2


def test_push_arguments_are_checked_before_any_work(tmp_path):
    from builders.publish import PublishError

    with pytest.raises(PublishError, match="go together"):
        build_corpus("marc", out=tmp_path / "out", push="acme/marc")
    with pytest.raises(PublishError, match="not semantic"):
        build_corpus("marc", out=tmp_path / "out", push="acme/marc", version="1.0")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------ builds (the marc sample)


def _timeless(x):
    """``stats.json`` without what the clock decides (seconds)."""
    if isinstance(x, dict):
        return {k: _timeless(v) for k, v in x.items() if "seconds" not in k}
    if isinstance(x, list):
        return [_timeless(v) for v in x]
    return x


@pytest.fixture(scope="module")
def marc_builds(tmp_path_factory) -> tuple[BuildOutcome, Path, Path]:
    """The bundled marc sample built through the API (``build_corpus("marc", out=...)``) and through the CLI."""
    api_out = tmp_path_factory.mktemp("api")
    outcome = build_corpus("marc", out=api_out, progress=False, quiet=True)
    cli_out = tmp_path_factory.mktemp("cli")
    assert main(["marc", "--out", str(cli_out), "--no-progress", "-q"]) == 0
    return outcome, api_out, cli_out / "marc"


@pytest.mark.slow
def test_build_corpus_builds_the_sample_as_the_cli_does(marc_builds):
    outcome, api_out, cli_release = marc_builds
    assert outcome.release == api_out / "marc" and outcome.corpus == "marc"
    assert outcome.sample and not outcome.up_to_date and outcome.work_dir == api_out / ".work" / "marc"
    written = json.loads((outcome.release / "stats.json").read_text())
    assert outcome.stats == written
    cli_stats = json.loads((cli_release / "stats.json").read_text())
    assert outcome.rows == cli_stats["release"] == written["release"]
    assert _timeless(outcome.stats) == _timeless(cli_stats)
    assert "release: recipes train=" in outcome.summary and str(outcome) == outcome.summary
    assert set(outcome.rows) >= {"recipes", "pairwise_text_video", "joint"}


@pytest.mark.slow
def test_a_config_mapping_reaches_the_release(marc_builds, tmp_path):
    outcome, _, _ = marc_builds
    again = build_corpus("marc", out=tmp_path, work_dir=outcome.work_dir, config={"paraphrase_threshold": 0.75},
                         progress=False, quiet=True)   # the same work directory: only the release is redone
    written = yaml.safe_load((again.release / "build_config.yaml").read_text())
    assert written["paraphrase_threshold"] == 0.75
    assert yaml.safe_load((outcome.release / "build_config.yaml").read_text())["paraphrase_threshold"] == 0.5
    assert sum(again.rows["paraphrases"].values()) < sum(outcome.rows["paraphrases"].values())
    assert again.rows["recipes"] == outcome.rows["recipes"]


@pytest.mark.slow
def test_a_rebuild_says_up_to_date_and_the_release_loads(marc_builds, tmp_path, monkeypatch, capsys):
    outcome, api_out, _ = marc_builds
    again = build_corpus("marc", out=api_out, progress=False)
    assert again.up_to_date and again.rows == outcome.rows
    assert "is up to date" in capsys.readouterr().out   # quiet=False prints the summary, as the CLI does
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    recipes = again.load("recipes", split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert len(recipes) == outcome.rows["recipes"]["train"]


def test_the_docs_page_lists_every_option_with_its_default():
    page = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    for f in dataclasses.fields(BuildOptions):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        row = re.search(rf"^\| `{f.name}` \| [^|]+ \| ([^|]+) \|$", page, re.M)
        assert row, f"docs/python-api.md has no row for BuildOptions.{f.name}"
        assert row.group(1).startswith(f"`{default!r}`"), (f.name, row.group(1))
