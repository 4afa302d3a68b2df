"""Every command of the ```bash blocks of README.md, docs/*.md and docs/corpora/*.md runs as written from a clone
(issue 23): the cheap, self-contained ones are run here; the others are in NOT_RUN with the reason each is not."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "docs" / "corpora").glob("*.md"))]

_BUILD_INPUTS = "needs the real inputs it names (HowTo100M lists, transcripts, RecipeNLG, crawls, models)"
_SAMPLE = ("builds a bundled sample corpus with the CPU models (minutes); tests/corpora/*/test_build.py build the "
           "samples")
_BUILT = "needs a corpus built first (make sample or a build from real inputs)"
_NASVA = ("the NaSVA round trip takes minutes (35 s of synthetic data, ~2 min of training on 2 cores); "
          "tests/nasva/test_synthetic.py runs the same steps at a small scale")

#: command (tokens joined by one space, comments dropped) -> why this test does not run it
NOT_RUN: dict[str, str] = {
    "make sample": "installs the packages and builds the four sample corpora (minutes, network for pip)",
    "make test": "installs the test packages and runs the whole suite, this test included",
    "PROCVID_TEST_DATA=/path/to/fixtures make test": "the whole suite, on a fixture folder given by the reader",
    "make test-data": "downloads the real fixtures from upstream (network)",
    "make docs": "installs mkdocs and builds the site; tests/test_docs.py builds it with mkdocs --strict",
    # README: the real YouCook2 validation file; docs/getting-started.md runs the same command on docs/examples
    "python -m builders.build sieve_swap --videos HowTo100M_v1.csv --tasks task_ids.csv --transcripts "
    "raw_caption.json --recipes full_dataset.csv --out /data/releases": _BUILD_INPUTS,
    "python -m builders.build sieve_swap --out /data/releases --work-dir /scratch/ss --videos HowTo100M_v1.csv "
    "--tasks task_ids.csv --titles titles.csv --durations durations.csv --transcripts raw_caption.json --recipes "
    "full_dataset.csv --exclude youcookii_annotations_trainval.json --exclude test_list.txt": _BUILD_INPUTS,
    "python -m builders.build howtostep --videos HowTo100M_v1.csv --tasks task_ids.csv --video-ids "
    "htm370k_vids.txt --transcripts whisperx/ --transcript-format whisperx --features clip_l14/ --set "
    "visual_features=file --exclude video_splits.json --exclude htm_holdout_vid.txt": _BUILD_INPUTS,
    "python -m builders.build howtostep ... --set preset=paper --set llm_model_path=/models/Llama-2-7b-chat-hf --set "
    "asr_model_path=/models/whisperx --set asr_align_model_path=/models/wav2vec2 --set "
    "vision_model_path=/models/clip-vit-large-patch14": _BUILD_INPUTS + "; '...' stands for the inputs",
    "python -m builders.build marc --warc crawl/ --videos video_candidates.jsonl --transcripts raw_caption.json "
    "--youcook2 youcookii_annotations_trainval.json --youcook2-transcripts yc2_raw_caption.json": _BUILD_INPUTS,
    "python -m builders.build marc --pages pages/ --set aligner=paper": _BUILD_INPUTS,
    "python -m builders.build showhowto --manifest videos.csv --videos HowTo100M_v1.csv --tasks task_ids.csv --set "
    "preset=paper --set llm_model_path=/models/Llama-3.1-8B-Instruct --set clip_model_path=/models/dfn5b.bin --set "
    "asr_model_path=/models/whisperx --set asr_align_model_path=/models/wav2vec2 --with-images":
        _BUILD_INPUTS + "; a GPU",
    "python -m builders.build showhowto ... --set constrained_json=true": _BUILD_INPUTS + "; '...' stands for them",
    "python -m builders.build showhowto ... --test-list official_test_ids.txt --export-upstream":
        _BUILD_INPUTS + "; '...' stands for them",
    "python -m builders.build sieve_swap": _SAMPLE,
    "python -m builders.build marc": _SAMPLE,
    "python -m builders.build howtostep": _SAMPLE,
    "python -m builders.build showhowto": _SAMPLE,
    "python -m builders.build howtostep --set labeler=mptva": _SAMPLE,
    "python -m builders.build howtostep --set llm=replay --set llm_replay=./howtostep": _BUILT,
    "python -m builders.corpora.sieve_swap.calibrate --work-dir .work/sieve_swap": _BUILT + " (its work dir)",
    "python -m builders.explore howtostep": _BUILT,
    "python -m builders.explore sieve_swap --videos 500 --seed 1": _BUILT,
    "python -m builders.explore showhowto --media videos/": _BUILT + ", and local video files",
    "python -m builders.explore <org>/howtostep --revision v1.0.0 --out howtostep-explore.html":
        "a template: <org> is the reader's Hub organisation (network)",
    "python -m builders.publish sieve_swap --repo <org>/sieve_swap --version v1.0.0 --dry-run":
        "a template (<org>); needs ./sieve_swap built; tests/test_publish_cli.py runs --dry-run",
    "python -m builders.publish sieve_swap --repo <org>/sieve_swap --version v1.0.0 [--private] [--message TEXT] "
    "[--timeout SECONDS] [--deadline SECONDS]": "a synopsis with optional [arguments]; publishes to the Hub (network)",
    "python -m builders.build marc --push <org>/marc --version v1.1.0": "builds, then publishes to the Hub (network)",
    "python -m builders.nasva.synthetic --out syn": _NASVA,
    "python -m builders.nasva.train --features syn/features --labels syn/train.json --out ckpt --threads 1": _NASVA,
    "python -m builders.nasva.infer --ckpt ckpt --features syn/features --texts syn/val.json --out pred.json": _NASVA,
    "python eval/run.py htm_align --gt syn/val_htm_align.json --pred pred.json": _NASVA,
    # docs/architecture.md: a Slurm batch script, keyed by its first command
    "nodes=($(scontrol show hostnames $SLURM_JOB_NODELIST)); head=${nodes[0]}; port=6379":
        "a Slurm batch script for a Ray cluster of GPU nodes",
}

#: commands whose protocol runs pycocoevalcap's Java scorers
_JAVA = re.compile(r"^python eval/run\.py (densevid|soda) (?!--help)")


@dataclass(frozen=True)
class DocCommand:
    """One command of a ```bash block: its page and line, the text as written and its key (tokens, no comments)."""

    page: str
    line: int
    text: str
    key: str


def doc_commands(pages: list[Path] = PAGES) -> list[DocCommand]:
    """The commands of every ```bash block, continuation lines joined; a script (``#!``) is one command keyed by its
    first command line."""
    out: list[DocCommand] = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for block in re.finditer(r"^```bash\n(.*?)^```", text, re.S | re.M):
            first = text[: block.start()].count("\n") + 2
            body = block.group(1)
            rel = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)
            lines = body.split("\n")
            if lines[0].startswith("#!"):
                head = next(ln for ln in lines[1:] if ln.strip() and not ln.lstrip().startswith("#"))
                out.append(DocCommand(rel, first, body, " ".join(shlex.split(head, comments=True))))
                continue
            n = 0
            while n < len(lines):
                start, joined = n, lines[n]
                while joined.endswith("\\") and n + 1 < len(lines):
                    n += 1
                    joined = joined[:-1] + " " + lines[n].strip()
                n += 1
                words = shlex.split(joined, comments=True)
                if words:
                    out.append(DocCommand(rel, first + start, joined, " ".join(words)))
    return out


def _examples_section() -> Path:
    """docs/evaluation.md's "Examples for every protocol" section alone, as a page (its commands are run, and their
    printed tables compared with the page, by tests/eval/test_doc_examples.py)."""
    text = (ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    start = text.index("## Examples for every protocol")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


COMMANDS = doc_commands()
#: run by tests/eval/test_doc_examples.py (which also checks their output), not twice
RUN_BY_EXAMPLES = {c.key for c in COMMANDS if c.page == "docs/evaluation.md" and c.text in _examples_section()}
#: the commands this test runs: each once (where it first appears)
TO_RUN = [c for n, c in enumerate(COMMANDS) if c.key not in NOT_RUN.keys() | RUN_BY_EXAMPLES
          and c.key not in {d.key for d in COMMANDS[:n]}]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in for a fresh clone: a folder linking every top-level entry of the repository, so that what a
    command writes (``--out result.json``) lands there and not in the working tree."""
    folder = tmp_path_factory.mktemp("clone")
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (folder / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return folder


def test_the_pages_hold_the_commands_this_test_expects() -> None:
    keys = {c.key for c in COMMANDS}
    assert {"python eval/run.py --help", "python -m builders.build --help", "make sample"} <= keys
    assert len(COMMANDS) >= 40
    assert all(c.key for c in COMMANDS)


def test_doc_commands_joins_continuations_drops_comments_and_keeps_scripts_whole(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n```bash\npython a.py --x 1 \\\n    --y 2   # a comment\n\n# only a comment\nmake b\n"
                    "```\n\n```python\nprint('not bash')\n```\n\n"
                    "```bash\n#!/bin/bash\n#SBATCH --nodes=2\nsrun c\nsleep 1\n```\n", encoding="utf-8")
    found = [(c.line, c.key) for c in doc_commands([page])]
    assert found == [(4, "python a.py --x 1 --y 2"), (8, "make b"), (16, "srun c")]
    assert doc_commands([page])[0].text == "python a.py --x 1  --y 2   # a comment"


def test_every_not_run_entry_is_still_in_the_docs() -> None:
    """An entry whose command left the docs is removed (the list stays short and current)."""
    stale = sorted(set(NOT_RUN) - {c.key for c in COMMANDS})
    assert stale == []


def test_every_protocol_example_is_run() -> None:
    """The documented example of each of the ten evaluation protocols is run, none is listed in NOT_RUN."""
    examples = {key.split()[2] for key in RUN_BY_EXAMPLES}
    assert len(RUN_BY_EXAMPLES) == len(examples) == 10
    assert not RUN_BY_EXAMPLES & set(NOT_RUN)
    assert (ROOT / "tests" / "eval" / "test_doc_examples.py").is_file()


def _env() -> dict[str, str]:
    """The environment, with this interpreter's folder first on PATH: the docs' ``python`` is the project's."""
    return {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


@pytest.mark.parametrize("command", TO_RUN, ids=[f"{c.page}:{c.line}" for c in TO_RUN])
def test_command_runs_as_written(command: DocCommand, clone: Path) -> None:
    if _JAVA.match(command.key) and shutil.which("java") is None:
        pytest.skip("needs `java` for pycocoevalcap's METEOR (make install installs it)")
    proc = subprocess.run(["bash", "-c", command.text], cwd=clone, capture_output=True, text=True, timeout=600,
                          check=False, env=_env())
    assert proc.returncode == 0, f"{command.page}:{command.line}: `{command.text}` exited {proc.returncode}:\n" \
                                 f"{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{command.page}:{command.line}: `{command.text}` printed nothing"
