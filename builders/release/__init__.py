"""The release: a build's final work shards written as a dataset folder, checked, and swapped into place
(docs/publishing.md, "The release folder"; docs/architecture.md, "The release step").

Modules, one concern each:

===============  =====================================================================================================
``flow``         the one release flow every corpus goes through (``ReleaseSpec``, ``write_release``, the release key)
``writer``       Parquet shards per config and split, streamed (``write_split_stream``, ``write_split_tables``,
                 ``encode_rows``, ``shard_name``)
``parts``        release rows made one work shard at a time and cached (``ShardedRows``, ``ShardedScan``)
``streaming``    helpers for corpus releases: ``count_rows``, ``SortedSpill`` (sorting on disk), ``write_json_object``
``gate``         the release gate (``gate``, ``ReleaseGateError``, ``split_info``)
``card``         ``README.md`` (``write_readme``, ``render_card``, ``render_readme``) and the cards' tables
                 (``md_table``, ``stats_tables``)
``manifest``     ``manifest.json``/``stats.json`` (``write_json_atomic``, ``git_commit``) and ``up_to_date_release``
``drops``        ``drops.parquet`` (``write_drops``)
``swap``         staging folders, the release lock, ``swap_into_place`` and ``recover_swap``
``report``       ``report.html`` (``write_report``), with ``tallies`` (streamed distributions) and ``charts`` (SVG)
``light``        features without ``datasets`` (``LightFeatures``, ``feature_record``) and their encoder
                 (``encode_light``)
``cache``        the release cache in the work directory (``ReleaseCache``): records keyed by what they depend on
``incremental``  what a rewrite takes from the cache (features, shards of unchanged configs, the README header) and
                 ``write_configs`` (the configs' shards, written in a background thread)
===============  =====================================================================================================

Publishing to the Hub is not done here (``builders.publish``). Importing this package imports none of its modules:
the public names of the former ``builders/release.py`` are loaded from their module on first use (``from
builders.release import write_readme``). The gate itself is ``builders.release.gate.gate``: ``builders.release.gate``
is its module.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

#: public name -> the module of this package that defines it
_EXPORTS = {
    **dict.fromkeys(["BuildEmpty", "DEFAULT_CARD_TEMPLATE", "ReleaseSpec", "write_release"], "flow"),
    **dict.fromkeys(["ENCODE_BATCH_ROWS", "MAX_SHARD_BYTES", "MEDIA_BATCH_ROWS", "RowSource", "encode_rows",
                     "shard_name", "write_split", "write_split_stream", "write_split_tables"], "writer"),
    **dict.fromkeys(["ReleaseGateError", "split_info"], "gate"),
    **dict.fromkeys(["FINGERPRINT_FIELD", "FINGERPRINT_TEXT", "config_fingerprint", "size_category", "write_readme"],
                    "card"),
    **dict.fromkeys(["compare_with_paper", "fmt_value", "md_table", "render_card", "stats_tables"], "card_text"),
    **dict.fromkeys(["RELEASE_FILES_FIELD", "RELEASE_KEY_FIELD", "RELEASE_ROWS_FIELD", "git_commit",
                     "release_listing", "up_to_date_release", "write_json_atomic"], "manifest"),
    **dict.fromkeys(["DROPS_BATCH_ROWS", "write_drops"], "drops"),
    **dict.fromkeys(["ReleaseLocked", "clean_stale_stages", "discard_stage", "lock_path", "old_path", "recover_swap",
                     "release_lock", "scratch_dir", "stage_release", "staging_root", "swap_into_place"], "swap"),
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
