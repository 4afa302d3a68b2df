"""The corpus explorer: ``explore.html`` beside every release, a static page to look at the data.

``write_explorer(release_dir)`` reads the release folder (its Parquet shards, ``stats.json``, ``manifest.json``; for
``showhowto`` also the build's video files when they are found, see ``builders.explore.showhowto``) and writes
``explore.html`` into it (and nothing else): a page that works from ``file://`` with no server and no
network (scripts, styles and thumbnails inline), that embeds a deterministic sample of at most ``videos`` items (never
the whole corpus) as JSON and renders one item at a time with a small vanilla-JS view per corpus:

* ``howtostep`` -- a timeline per video: narrations, Stage-1 and Stage-2 windows, MPTVA pathways, dropped steps
  (Li et al., ECCV 2024, §3.2; Chen et al., ECCV 2024, §3.2);
* ``showhowto`` -- keyframes in step order with their text, the task and the LLM filter's answer (Souček et al.,
  CVPR 2025, §3);
* ``sieve_swap`` -- ASR segments with the recipe step swapped in and its similarity, discarded ones greyed, the
  matched recipe (Batra et al., ECCV 2024, §3);
* ``marc`` -- a recipe pair side by side with its HMM+IBM1 alignment as links (Lin et al., ACL 2020, §3.1).

Every text from the data is escaped: the JSON cannot close its ``<script>`` element and the page puts text into the
DOM as text nodes only; the jinja2 template autoescapes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._release import Release

if TYPE_CHECKING:
    from .reuse import ItemReuse

__all__ = ["CORPORA", "DEFAULT_VIDEOS", "Inputs", "detect_corpus", "render_explorer", "write_explorer"]

#: a build's inputs as it resolved them: config key -> absolute paths (``builders.release.manifest.input_paths``)
Inputs = Mapping[str, Sequence["str | os.PathLike[str]"]]

#: items embedded by default (a page of a few hundred KB to a few MB, whatever the corpus size)
DEFAULT_VIDEOS = 200
CORPORA = ("howtostep", "showhowto", "sieve_swap", "marc")
_TITLES = {"howtostep": "HowToStep explorer", "showhowto": "ShowHowTo explorer", "sieve_swap": "Sieve & Swap explorer",
           "marc": "MARC explorer"}
#: bytes of embedded data at most: items past it are left out (the page stays under 5 MB, whatever the texts)
DATA_BUDGET = 4_500_000
#: the views that take items from an earlier page (``builders.explore.reuse``; their ``collect`` takes ``reuse``)
_REUSES = {"howtostep"}
#: the config that identifies a corpus when neither stats.json nor manifest.json names it (a bare Hub snapshot)
_SIGNATURE = (("howtostep", "steps"), ("showhowto", "sequences"), ("sieve_swap", "raw_asr"),
              ("marc", "pairwise_text_text"), ("marc", "pairwise_text_video"), ("marc", "recipes"))


def detect_corpus(release_dir: str | os.PathLike | Release) -> str:
    """The corpus of a release folder: ``manifest.json`` / ``stats.json`` ``corpus``, else its config folders."""
    rel = release_dir if isinstance(release_dir, Release) else Release(release_dir)
    for name in ("manifest.json", "stats.json"):
        corpus = rel.json(name).get("corpus")
        if corpus in CORPORA:
            return corpus
    configs = set(rel.configs())
    for corpus, config in _SIGNATURE:
        if config in configs:
            return corpus
    raise ValueError(f"{rel.root}: not a release of {', '.join(CORPORA)} (no corpus in manifest.json or "
                     f"stats.json, configs {sorted(configs) or 'none'})")


def _collector(corpus: str) -> Callable[..., dict[str, Any]]:
    if corpus == "howtostep":
        from .howtostep import collect
    elif corpus == "showhowto":
        from .showhowto import collect
    elif corpus == "sieve_swap":
        from .sieve_swap import collect
    elif corpus == "marc":
        from .marc import collect
    else:
        raise ValueError(f"unknown corpus {corpus!r}; expected one of {', '.join(CORPORA)}")
    return collect


def _asset(name: str) -> str:
    text = resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "<!--" in text:
        raise AssertionError(f"template asset {name} would close its <script>/<style> element")
    return text


def _within(items: list[dict[str, Any]], budget: int, encode: Callable[[Any], str]) -> tuple[list[Any], int]:
    """The leading ``items`` whose JSON fits in ``budget`` bytes, and how many were left out."""
    kept, _, left = _within_encoded(items, budget, encode)
    return kept, left


def _within_encoded(items: list[Any], budget: int, encode: Callable[[Any], str]
                    ) -> tuple[list[Any], list[str], int]:
    """``_within``, with the encoded JSON of the items kept (each item is encoded once; an ``Encoded`` item is its
    text already)."""
    from .reuse import Encoded

    used = 0
    texts: list[str] = []
    for k, item in enumerate(items):
        text = item.json if isinstance(item, Encoded) else encode(item)
        used += len(text.encode("utf-8")) + 1
        if used > budget and k:
            return items[:k], texts, len(items) - k
        texts.append(text)
    return items, texts, 0


def _payload_json(payload: dict[str, Any], items_json: list[str]) -> str:
    """``json_for_script(payload)`` from the items' own ``json_for_script`` texts: the items are not encoded twice.
    ``items`` must be the payload's first key (the JSON then opens with ``{"items":[``); the escaping of
    ``json_for_script`` works character by character, so the joined texts are the text of the joined items."""
    from .common import json_for_script

    if next(iter(payload), None) != "items":
        return json_for_script(payload)
    rest = json_for_script({**payload, "items": []})
    head = '{"items":[]'
    if not rest.startswith(head):  # pragma: no cover - json.dumps writes the first key first
        return json_for_script(payload)
    return '{"items":[' + ",".join(items_json) + "]" + rest[len(head):]


def _template_cache(directory: Path) -> Any:
    """jinja2's bytecode cache in ``directory``, for which a failed write (a full disk) is no error: only a cache."""
    import jinja2

    class TemplateCache(jinja2.FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: Any) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    return TemplateCache(str(directory), "explore-%s.jinja")


def render_explorer(release_dir: str | os.PathLike, *, corpus: str | None = None, videos: int = DEFAULT_VIDEOS,
                    seed: int = 0, media: str | os.PathLike | None = None, page_dir: str | os.PathLike | None = None,
                    manifest: dict[str, Any] | None = None, reuse: ItemReuse | None = None,
                    inputs: Inputs | None = None, inputs_root: str | os.PathLike | None = None) -> str:
    """The explorer page of a release as an HTML string (see ``write_explorer``); ``page_dir`` is the folder the page
    will live in (links to ``report.html`` and ``README.md`` are made relative to it)."""
    import jinja2
    from markupsafe import Markup

    from .common import json_for_script

    rel = Release(release_dir, {"manifest.json": manifest} if manifest is not None else None)
    corpus = corpus or detect_corpus(rel)
    collect = _collector(corpus)
    kw: dict[str, Any] = {}
    if corpus == "showhowto":  # the only view that reads the build's inputs (its media)
        given = {"media": media, "inputs": inputs, "inputs_root": inputs_root}
        kw = {k: v for k, v in given.items() if v is not None}
    if reuse is not None and corpus in _REUSES:
        kw["reuse"] = reuse
    payload = collect(rel, max(0, int(videos)), int(seed), **kw)
    payload["items"], items_json, payload["over_budget"] = _within_encoded(payload["items"], DATA_BUDGET,
                                                                           json_for_script)
    if "reuse" in kw:
        from .reuse import Encoded

        reuse.save([(item.id if isinstance(item, Encoded) else item.get("id"), text)
                    for item, text in zip(payload["items"], items_json)])
    main = [c for c in payload.get("main_config", "").split(",") if c]
    rows = {c: rel.num_rows(c) for c in rel.configs()}
    total = sum(n for c in main for n in rows.get(c, {}).values())
    payload.update(corpus=corpus, seed=int(seed), total=total)
    page_dir = Path(page_dir) if page_dir is not None else rel.root

    def href(name: str) -> str:
        return Path(os.path.relpath(rel.root / name, page_dir)).as_posix()

    # with a release cache (``reuse``) the compiled template is kept beside the item record (jinja2 checks the
    # template's source before it uses it)
    cache = _template_cache(reuse.record.parent) if reuse is not None and reuse.record.parent.is_dir() else None
    env = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, bytecode_cache=cache)
    return env.get_template("explore.html.j2").render(
        title=_TITLES[corpus], corpus=corpus, unit=payload.get("unit", "item"), shown=len(payload["items"]),
        total=total, seed=int(seed), over_budget=payload["over_budget"], rows=rows,
        report_href=href("report.html"), card_href=href("README.md"),
        css=Markup(_asset("explore.css")), data_json=Markup(_payload_json(payload, items_json)),
        scripts=[Markup(_asset(f"{corpus}.js")), Markup(_asset("explore.js"))])


def write_explorer(release_dir: str | os.PathLike, *, corpus: str | None = None, videos: int = DEFAULT_VIDEOS,
                   seed: int = 0, media: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
                   manifest: dict[str, Any] | None = None, reuse: ItemReuse | None = None,
                   inputs: Inputs | None = None, inputs_root: str | os.PathLike | None = None) -> Path:
    """Write ``explore.html`` into ``release_dir`` (or at ``out``) and return its path.

    Reads the release folder: ``videos`` items (videos, sequences or recipe pairs) sampled deterministically by
    ``seed``, with the rows of the other configs that belong to them. ``corpus`` defaults to the one the folder
    names. ``manifest`` stands for ``manifest.json`` when the release flow has not written it yet (its ``config``
    and ``inputs`` are read). The file is written under a hidden temporary name and renamed into place. ``reuse``
    (the release flow's, ``builders.explore.reuse``) takes the items whose rows did not change from the page an
    earlier build wrote (views that support it: ``howtostep``); the page is the same.

    showhowto, when the release has no ``images`` config, cuts keyframe thumbnails from the build's videos:
    ``media`` is a folder of ``<video_id>.<mp4|webm|mkv>``; without it the video manifest is found through
    ``inputs`` (the build's own resolved input paths, config key -> absolute paths, which the release flow passes so
    that the page a build writes shows the videos it read; never written into the page or the release), else as
    the path the release records relative to the inputs' common folder, under ``inputs_root`` (that folder on this
    machine), under the folder ``manifest.json`` records relative to the release, or under the current directory
    (``builders.explore.showhowto``, docs/explorer.md).
    """
    release_dir = Path(release_dir)
    path = Path(out) if out is not None else release_dir / "explore.html"
    text = render_explorer(release_dir, corpus=corpus, videos=videos, seed=seed, media=media, page_dir=path.parent,
                           manifest=manifest, reuse=reuse, inputs=inputs, inputs_root=inputs_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
