"""The release-notes section of the uploaded card (docs/publishing.md, "Publishing a version"): this version, the
previous version and what changed (configs added or removed, rows per split), between two HTML comments so that a
card is compared apart from it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .checks import SEMVER_RE, parse_version

if TYPE_CHECKING:
    from .upload import Layout

__all__ = ["NOTES_END", "NOTES_START", "previous_version", "release_notes", "strip_notes"]

NOTES_START = "<!-- release-notes:start -->"
NOTES_END = "<!-- release-notes:end -->"


def strip_notes(text: str) -> str:
    """README text without the generated release-notes block (compared apart from it)."""
    return re.sub(re.escape(NOTES_START) + r".*?" + re.escape(NOTES_END) + r"\n?", "", text, flags=re.S)


def _semver_tags(tags: list[str]) -> list[tuple[tuple[int, int, int], str]]:
    return sorted((tuple(int(x) for x in m.groups()), t) for t in tags if (m := SEMVER_RE.fullmatch(t)))


def previous_version(tags: list[str], version: str) -> str | None:
    """The highest semantic tag below ``version``."""
    v = parse_version(version)
    below = [t for k, t in _semver_tags(tags) if k < v]
    return below[-1] if below else None


def release_notes(repo: str, version: str, previous: str | None, layout: Layout,
                  previous_rows: dict[str, dict[str, int]] | None) -> str:
    """The release-notes block appended to the uploaded README: version, previous version, what changed."""
    from ..release.card import md_table

    lines = [NOTES_START, "", f"## Release {version}", "",
             f"- version: `{version}` (load it with `datasets.load_dataset(\"{repo}\", \"<config>\", "
             f"revision=\"{version}\")`)",
             f"- previous version: `{previous}`" if previous else "- previous version: none (first release)"]
    prev = previous_rows or {}
    if previous:
        added = sorted(set(layout.rows) - set(prev))
        removed = sorted(set(prev) - set(layout.rows))
        lines.append(f"- configs added: {', '.join(added) or 'none'}; configs removed: {', '.join(removed) or 'none'}")
    table = []
    for cfg in sorted(set(layout.rows) | set(prev)):
        for split in sorted(set(layout.rows.get(cfg, {})) | set(prev.get(cfg, {}))):
            now, before = layout.rows.get(cfg, {}).get(split), prev.get(cfg, {}).get(split)
            if previous:
                delta = "–" if now is None or before is None else f"{now - before:+,}"
                table.append([cfg, split, "–" if before is None else f"{before:,}",
                              "–" if now is None else f"{now:,}", delta])
            else:
                table.append([cfg, split, f"{now:,}"])
    header = ["config", "split", f"rows in {previous}", f"rows in {version}", "change"] if previous else \
        ["config", "split", "rows"]
    lines += ["", md_table(header, table), "", NOTES_END, ""]
    return "\n".join(lines)


def rows_from_card(text: str) -> dict[str, dict[str, int]]:
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCard

    infos = DatasetInfosDict.from_dataset_card_data(DatasetCard(text).data)
    return {c: {s: si.num_examples for s, si in (i.splits or {}).items()} for c, i in infos.items()}
