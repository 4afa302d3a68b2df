"""The MARC-style aligned recipe corpus (Lin et al., ACL 2020, §2-§5,
A.1-A.2; docs/corpora/marc.md).

Four pipelines, in run order (each stage cached per shard, so a killed build resumes):

* ``text``: Common Crawl WARC files and HTML pages -> Schema.org recipes (§2.1) -> instructions, the five recipe
  filters, dishes and dish splits (§2, A.1.1) -> ingredient terms (§2.3, A.1.4);
* ``videos``: video candidates per dish -> transcripts -> sentences -> chat/content classifier (A.1.3) ->
  videos per dish -> ingredient terms of the content sentences;
* ``pairs``: within-dish pairs with ingredient and length pruning (§2.3, A.1.4) -> HMM+IBM1 posteriors in both
  directions (§3.1, Eq. 1, A.2);
* ``dishes``: the instruction graph of each dish -> joint alignment (maximum spanning forest, §3.2).

Paraphrases (§5.2) and multi-step breakdowns (§5.3) are pure functions of the pairwise posteriors, computed by the
release (``marc.release``).

Per-item invalidation (README.md "Caching and resume"): a WARC record's pointer row carries the sha256 of the record's bytes
and a page of ``--pages`` keys its shard of ``read_recipe_pages`` by its content; a video's transcript (its entry of
the ``raw_caption.json`` split, or its WhisperX file) keys its shard of ``load_transcript``; the video candidates carry
their dish's name, split and size (joined from the text pipeline when listed). So editing one page or one transcript
redoes the shards holding it in the ``text`` / ``videos`` pipelines, and the global stages whose input changed:
``select_text_recipes`` (fitted again, its outcome redoes its shards - a table look-up - when it changed),
``video_recipe`` (the dish vocabulary: every shard again after a page edit, an intersection), ``load_transcript`` /
``chat_filter`` / ``pick_videos`` (fitted again; the classifier comes from the build's cache), and the whole ``pairs``
and ``dishes`` pipelines (HMM+IBM1 is trained by EM on every train pair, then every dish graph changes).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from ...core.fingerprint import hash_obj
from ...core.records import Count, Drop, Out, Row
from ...core.step import FitInputs, Pipeline, Source, Step, gpus_for_device
from ...ops import dishes as dish_ops
from ...ops.joint_alignment import joint_alignment
from .config import MarcConfig
from .text import select_text_recipes

NOUN_POS = frozenset({"NOUN", "PROPN"})


def _steps_storable(steps: Any) -> list[dict[str, Any]]:
    out = []
    for s in steps:
        text, section, name = (list(s) + [None, None, None])[:3]
        out.append({"text": str(text or ""), "section": section, "step_name": name})
    return out


# ============================================================================ text pipeline (§2, §2.3, A.1)
class RecipePagesSource(Source):
    """Lists the web pages (docs/corpora/marc.md, Inputs): one cheap pointer per WARC record (file, offset, length;
    warcio reads only headers and skips payloads) and per HTML file of ``pages``; records refused on their headers are
    drops here. Parsing is the next step's, so a killed build resumes inside a long WARC file. ``limit`` keeps the first
    N pages."""

    name = "list_recipe_pages"
    version = "3"
    config_keys = ("warc", "pages", "limit")
    #: a WARC pointer row carries ``_sha``, the sha256 of the record's bytes; a page row names its file, whose content
    #: keys its shard of ``read_recipe_pages`` (:meth:`ParseRecipePages.item_digest`): the listing is made again
    #: into the same folder when an input changes, and only the shards of changed records or pages are parsed again
    rows_carry_content = True

    def input_paths(self) -> list[Path]:
        from ...sources.html_pages import list_pages
        from ...sources.warc import find_warc_files

        paths = [p for p, _ in find_warc_files(self.cfg.warc)] if self.cfg.warc else []
        if self.cfg.pages:  # a listed entry that is no file (a directory, a dangling link) is a drop, not an input
            paths += [p for _, p in list_pages(self.cfg.pages) if p.is_file()]
        return paths

    def read(self) -> Iterator[Row | Drop | Count]:
        from ...sources.html_pages import list_pages
        from ...sources.warc import list_warc_records

        cfg = self.cfg
        record_sha = _RecordSha()
        warc = ({"page_id": x["record_id"], "kind": "warc", "path": x["path"], "offset": int(x["offset"]),
                 "length": int(x["length"]), "warc_filename": x["warc_filename"],
                 "_sha": record_sha(x["path"], int(x["offset"]), int(x["length"]))} if isinstance(x, dict) else x
                for x in (list_warc_records(cfg.warc) if cfg.warc else ()))
        pages = ({"page_id": key, "kind": "page", "path": str(path), "offset": -1, "length": -1,
                  "warc_filename": "", "_sha": ""} for key, path in (list_pages(cfg.pages) if cfg.pages else ()))
        n = 0
        try:
            for item in chain(warc, pages):
                if isinstance(item, dict):
                    if cfg.limit is not None and n >= cfg.limit:
                        yield Count("limit_reached")
                        break
                    n += 1
                yield item
        finally:
            record_sha.close()


class _RecordSha:
    """The sha256 of the bytes ``[offset, offset + length)`` of a file (a WARC record, its gzip member for
    ``.warc.gz``), the file kept open from one record to the next (the listing reads them in file order, and has just
    read those bytes: they come from the page cache). A file that cannot be read gives ``!<error>``: the record is then
    a ``warc_corrupt`` drop of the parse step, whose shard is redone when the file is listed again."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.f: Any = None

    def __call__(self, path: str, offset: int, length: int) -> str:
        import hashlib

        try:
            if self.path != path:
                self.close()
                self.f, self.path = open(path, "rb"), path
            self.f.seek(offset)
            h = hashlib.sha256()
            left = length
            while left > 0:
                chunk = self.f.read(min(left, 1 << 20))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
            return h.hexdigest()
        except OSError as e:
            self.close()
            return f"!{type(e).__name__}"

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
        self.f = self.path = None


class ParseRecipePages(Step):
    """Extraction (Lin et al., ACL 2020, §2.1): reads each listed page (one WARC record by offset, or one HTML file) and
    extracts its Schema.org recipes (JSON-LD with repairs, microdata); a page gives one row per recipe, or a named
    drop."""

    name = "read_recipe_pages"
    version = "2"
    id_field = "page_id"
    parent_field = "page_id"
    fan_out = True
    config_keys = ()
    #: a page of ``--pages`` feeds its own rows: its content keys its shard (a WARC record's is in its row, ``_sha``)
    input_keys = ("pages",)
    item_input_keys = ("pages",)
    item_fields = ("page_id", "kind", "path")

    def parent_id(self, item_id: str) -> str:
        return item_id.split("#", 1)[0]

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        from ...core.fingerprint import item_file_sha

        shas = []
        for r in rows:
            if r["kind"] != "page":
                continue
            try:
                shas.append((r["page_id"], item_file_sha(r["path"], memo)))
            except OSError as e:  # a folder named like a page: read_html_page drops it, the same way each time
                shas.append((r["page_id"], f"!{type(e).__name__}"))
        return hash_obj(shas) if shas else ""

    def process(self, rows: list[Row], out: Out) -> None:
        from ...sources.html_pages import read_html_page
        from ...sources.schema_org import read_schema_recipes
        from ...sources.warc import read_warc_record

        for r in rows:
            if r["kind"] == "warc":
                items = read_warc_record(r["path"], r["offset"], r["length"], r["warc_filename"])
            else:
                items = read_html_page(r["page_id"], r["path"])
            for item in read_schema_recipes(items):
                if isinstance(item, Count):
                    out.count(item.name, item.n)
                elif isinstance(item, Drop):
                    out.drop(item.item_id, item.reason, item.detail)
                else:
                    out.keep({**item, "steps": _steps_storable(item["steps"]),
                              "_key": f"{item['page_id']}#{item['recipe_index_in_page']}"})


class SelectTextRecipes(Step):
    """Lin et al., ACL 2020, §2, A.1.1: instructions, English, title length, duplicates, common title words, >= 2 steps,
    dishes with >= 3 recipes (capped at 100), dish splits. Global decisions, so the work is done once in ``fit``."""

    name = "select_text_recipes"
    version = "2"
    id_field = "recipe_id"
    config_keys = ("instruction_unit", "max_title_words", "min_steps", "title_word_quantile", "min_recipes_per_dish",
                   "max_recipes_per_dish", "test_dishes", "validation_dishes", "paper_dishes")

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """Global stage: the outcome of every record (its kept row or its drop), written as ``outcome.parquet``."""
        import json

        import pyarrow as pa
        import pyarrow.parquet as pq

        outcome = select_text_recipes(inputs.data.rows(), self.cfg).outcome
        table = [{"key": k, "drop": [o.item_id, o.reason, o.detail] if isinstance(o, Drop) else None,
                  "row": None if isinstance(o, Drop) else json.dumps(o, ensure_ascii=False)}
                 for k, o in sorted(outcome.items())]
        schema = pa.schema([("key", pa.string()), ("drop", pa.list_(pa.string())), ("row", pa.string())])
        pq.write_table(pa.Table.from_pylist(table, schema=schema), inputs.artefact_dir / "outcome.parquet")
        # the outcome's digest: when an edit changes it (a recipe's dish, a duplicate, the title-word quantile), every
        # shard is redone (a look-up); those whose rows come out the same leave the later stages cached
        return {"records": len(table), "digest": hash_obj(table)}

    def setup(self, state: Any) -> None:
        import pyarrow.parquet as pq

        from ...core.artefacts import artefact_dir

        self.outcome = pq.read_table(artefact_dir(state) / "outcome.parquet")
        self.index = {k: i for i, k in enumerate(self.outcome.column("key").to_pylist())}

    def process(self, rows: list[Row], out: Out) -> None:
        import json

        for r in rows:
            i = self.index[r["_key"]]
            drop = self.outcome.column("drop")[i].as_py()
            if drop is not None:
                out.drop(*drop)
            else:
                out.keep(json.loads(self.outcome.column("row")[i].as_py()))


class IngredientTerms(Step):
    """Ingredient terms (Lin et al., ACL 2020, §2.3, A.1.4): per ingredient line (casefolded, parentheses removed, cut
    at the first comma, quantities dropped) the spaCy lemmas of NOUN/PROPN tokens minus units and non-ingredient nouns;
    the recipe's set is the union."""

    name = "ingredient_terms"
    version = "1"
    id_field = "recipe_id"
    config_keys = ("spacy_model",)

    def setup(self, state: Any) -> None:
        from ...models.nlp import ContentLemmatizer

        self.lemmatize = ContentLemmatizer(self.cfg.spacy_model, pos=NOUN_POS)

    def process(self, rows: list[Row], out: Out) -> None:
        lines = [[dish_ops.clean_ingredient_line(x) for x in r["ingredients"]] for r in rows]
        flat = [x for ls in lines for x in ls]
        lemmas = iter(self.lemmatize(flat))
        for r, ls in zip(rows, lines):
            terms: set[str] = set()
            for _ in ls:
                terms |= dish_ops.ingredient_terms(next(lemmas))
            if not terms:
                out.count("no_ingredient_terms")
            out.keep({**r, "ingredient_terms": sorted(terms)})


# ============================================================================ videos pipeline (§2, A.1.3)
class VideoCandidatesSource(Source):
    """``video_candidates.jsonl`` (docs/corpora/marc.md, Inputs): search results per dish in rank order, each with its
    dish's name, split and number of text recipes from the ``text`` pipeline (``_dish_name``, ``_split``, ``_n_text``;
    null for a dish not in the corpus), which ``dish_videos`` reads. Rows carry their content, so an edit of the
    candidates or of the text recipes lists them again into the same folder, and only candidates whose row changed are
    processed again (a page edit that leaves the dish table as it was redoes no video)."""

    name = "read_video_candidates"
    version = "2"
    config_keys = ("videos",)
    input_keys = ("videos",)
    side_inputs = ("text",)
    rows_carry_content = True

    def read(self) -> Iterator[Row | Drop | Count]:
        if not self.cfg.videos:
            return
        from ...sources.video_candidates import read_video_candidates

        by_dish, drops = read_video_candidates(self.cfg.videos)
        yield from drops
        dishes = _dish_table(self.side["text"]) if by_dish else {}
        for dish in sorted(by_dish):
            d = dishes.get(dish)
            for c in by_dish[dish]:
                yield {"dish_id": c.dish_id, "rank": c.rank, "video_id": c.video_id, "title": c.title,
                       "query": c.query, "_key": f"{c.dish_id}:{c.video_id}",
                       "_dish_name": d["dish_name"] if d else None, "_split": d["split"] if d else None,
                       "_n_text": d["n_text"] if d else None}


def _dish_table(text: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in text.rows(["dish_id", "dish_name", "split", "ingredient_terms"]):
        d = out.setdefault(r["dish_id"], {"dish_name": r["dish_name"], "split": r["split"], "n_text": 0,
                                          "terms": set()})
        d["n_text"] += 1
        d["terms"].update(r["ingredient_terms"])
    return out


class DishVideos(Step):
    """Keep candidates of the corpus's dishes (those with >= 3 text recipes), with their dish name and split (joined
    by the source from the ``text`` pipeline's dish table)."""

    name = "dish_videos"
    version = "3"
    id_field = "_key"
    config_keys = ()

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            row = {k: v for k, v in r.items() if k not in ("_dish_name", "_split", "_n_text")}
            if r["_n_text"] is None:
                out.drop(r["_key"], "dish_not_in_corpus", r["dish_id"])
            else:
                out.keep({**row, "dish_name": r["_dish_name"], "split": r["_split"], "n_text": int(r["_n_text"])})


class LoadTranscript(Step):
    """Transcript sentences (docs/corpora/marc.md): WhisperX words joined and punkt-split, or raw caption lines
    (punkt-split when >= 30% of lines end a sentence, else one line = one sentence); ``no_transcript``,
    ``malformed_transcript``, ``empty_transcript``, ``non_english_transcript`` (py3langid; docs/reason-codes.md)."""

    name = "load_transcript"
    version = "2"
    id_field = "_key"
    config_keys = ("transcripts", "require_english_transcript")
    input_keys = ("transcripts",)
    #: a video's transcript keys only its rows (:meth:`item_digest`); the whole file keys the split (``fit``)
    item_input_keys = ("transcripts",)
    item_fields = ("video_id",)

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """Global stage: a ``raw_caption.json`` is split once into blocks of the wanted videos (artefact
        ``videos/``). A split stopped by a JSON error is in the state (every video it did not reach is then
        ``malformed_transcript``), so it redoes every shard."""
        from ...core.artefacts import save_json
        from ...sources.transcripts import open_transcripts

        wanted = {r["video_id"] for r in inputs.data.rows(["video_id"])}
        if not wanted:  # no video input (a text-only build) or no candidate of a corpus dish
            return {"root": None}
        save_json(inputs.artefact_dir, "wanted", sorted(wanted))
        store = open_transcripts(self.cfg.transcripts, inputs.artefact_dir / "videos", wanted)
        return {"root": "videos", "split_error": getattr(store, "split_error", "")}

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        from ...core.artefacts import artefact_dir
        from ...sources.transcripts import RAW_CAPTIONS_DIR, transcript_item_digests

        if state["root"] is None:
            return ""
        vids = [r["video_id"] for r in rows]
        split = None if Path(self.cfg.transcripts).is_dir() else artefact_dir(state) / state["root"] / RAW_CAPTIONS_DIR
        return hash_obj(vids, transcript_item_digests(vids, split, self.cfg.transcripts, memo))

    def setup(self, state: Any) -> None:
        from ...core.artefacts import artefact_dir, load_json
        from ...sources.transcripts import open_transcripts

        self.store = None
        if state["root"] is not None:
            root = artefact_dir(state)
            self.store = open_transcripts(self.cfg.transcripts, root / state["root"], set(load_json(root, "wanted")))

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models.chat_classifier import read_transcript, transcript_sentences
        from ...sources.schema_org import detect_language
        from ...sources.transcripts import TranscriptError

        for r in rows:
            try:
                t, words = read_transcript(self.store, r["video_id"])
            except TranscriptError as e:
                out.drop(r["_key"], e.reason, e.detail)
                continue
            sents = [(x, s, e) for x, s, e in transcript_sentences(t, words)
                     if math.isfinite(s) and math.isfinite(e) and any(ch.isalnum() for ch in x)]
            if not sents:
                out.drop(r["_key"], "empty_transcript", f"{len(t.segments)} segments, no sentence")
                continue
            if self.cfg.require_english_transcript:
                lang = t.language or detect_language(" ".join(x for x, _, _ in sents), "en")
                if lang and lang != "en":
                    out.drop(r["_key"], "non_english_transcript", f"language {lang}")
                    continue
            out.keep({**r, "asr_source": t.source, "duration": max(e for _, _, e in sents),
                      "sentences": [{"text": x, "start": s, "end": e} for x, s, e in sents]})


class ChatFilter(Step):
    """Lin et al., ACL 2020, A.1.3: remove chat sentences with the chat/content classifier (threshold 0.5), then drop
    videos with no content (``all_chat``), more than ``max_video_sentences`` (``too_many_sentences``) or fewer than
    ``min_video_sentences`` (``too_few_sentences``) sentences left.

    Global stage: ``fit`` trains the ``logreg`` classifier on YouCook2 labels (or loads ``chat_model``) once and
    writes it to its artefact folder with its labelled sentences (the ``chat_content`` config) and scores:
    ``model.json``, ``sentences.parquet``, ``scores.json``. The training files and the model file key its cache.
    """

    name = "chat_filter"
    version = "2"
    id_field = "_key"
    uses_model = True
    config_keys = ("classifier", "chat_model", "youcook2", "youcook2_transcripts", "embedding_model",
                   "chat_threshold", "max_video_sentences", "min_video_sentences")
    input_keys = ("chat_model", "youcook2", "youcook2_transcripts")

    def gpus(self) -> float:
        return gpus_for_device(self.cfg.device)

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        if self.cfg.classifier == "none" or not any(True for _ in inputs.data.rows(["_key"])):
            return {"name": "none", "model": None}
        from ...core.config import ConfigError
        from ...models.chat_classifier import ChatClassifier

        try:
            if self.cfg.chat_model:
                model = ChatClassifier.load(self.cfg.chat_model)
                model.save(inputs.artefact_dir / "model.json")
                return {"name": model.name, "model": "model.json", "trained": False}
            model_path = cached_chat_classifier(self.cfg, inputs.artefact_dir, inputs.cache_dir)
            return {"name": ChatClassifier.load(model_path).name, "model": "model.json", "trained": True}
        except ValueError as e:  # a bad model file, or training data without both labels / a validation split
            raise ConfigError(f"chat/content classifier: {e}") from e

    def setup(self, state: Any) -> None:
        self.state = state
        self.model = None
        if state["model"]:
            from ...core.artefacts import artefact_dir
            from ...models.chat_classifier import ChatClassifier
            from ...models.text_encoder import get_encoder

            self.model = ChatClassifier.load(artefact_dir(state) / state["model"])
            self.encoder = get_encoder(self.cfg.embedding_model, self.cfg.device, self.cfg.encode_batch_size)

    def teardown(self) -> None:
        from ...models.text_encoder import release_encoder

        release_encoder(self.cfg.embedding_model, self.cfg.device, self.cfg.encode_batch_size)
        self.model = self.encoder = None

    def process(self, rows: list[Row], out: Out) -> None:
        cfg = self.cfg
        for r in rows:
            sents = r["sentences"]
            if self.model is not None:
                proba = self.model.predict_proba([s["text"] for s in sents], [s["start"] for s in sents],
                                                 [s["end"] for s in sents], r["duration"], self.encoder)
                content = [s for s, p in zip(sents, proba) if p >= cfg.chat_threshold]
            else:
                content = list(sents)
            removed = len(sents) - len(content)
            out.count("chat_sentences_removed", removed)
            if not content:
                out.drop(r["_key"], "all_chat", f"{len(sents)} sentences, all chat")
            elif len(content) > cfg.max_video_sentences:
                out.drop(r["_key"], "too_many_sentences", f"{len(content)} content sentences")
            elif len(content) < cfg.min_video_sentences:
                out.drop(r["_key"], "too_few_sentences", f"{len(content)} content sentences")
            else:
                row = {k: v for k, v in r.items() if k != "sentences"}
                out.keep({**row, "content": content, "num_chat_removed": removed,
                          "chat_classifier": self.state["name"]})


#: bump when the training of the chat/content classifier changes (its cache key)
CHAT_TRAINING_VERSION = "1"
CLASSIFIER_FILES = ("model.json", "sentences.parquet", "scores.json")


def cached_chat_classifier(cfg: MarcConfig, folder: Path, cache_dir: Path | None) -> Path:
    """:func:`train_chat_classifier` into ``folder`` through the build's cache: the model and its files are kept in
    ``<cache_dir>/chat_classifier/<key>/``, keyed by the contents of the training inputs (YouCook2 annotations and
    transcripts) and the settings that change the model, so ``chat_filter``, fitted again whenever a video's
    transcript changes its input, does not train again. Returns the model path in ``folder``."""
    import shutil

    from ... import __version__ as toolkit_version
    from ...core.fingerprint import file_fingerprint, shared_memo

    if cache_dir is None:
        return train_chat_classifier(cfg, folder)
    memo = shared_memo(Path(cache_dir) / "fingerprints.sqlite")
    key = hash_obj("chat_classifier", CHAT_TRAINING_VERSION, ChatFilter.version, toolkit_version,
                   [file_fingerprint(p, memo)["sha256"] for p in (cfg.youcook2, cfg.youcook2_transcripts)],
                   cfg.embedding_model, cfg.device, cfg.encode_batch_size, cfg.chat_threshold)
    kept = Path(cache_dir) / "chat_classifier" / key[:32]
    if not (kept / "model.json").exists():  # written last by the training: its presence marks it complete
        train_chat_classifier(cfg, kept)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in CLASSIFIER_FILES:
        shutil.copyfile(kept / name, folder / name)
    return folder / "model.json"


def train_chat_classifier(cfg: MarcConfig, folder: Path) -> Path:
    """Train the ``logreg`` chat/content classifier on YouCook2 (Lin et al., ACL 2020, A.1.3) into ``folder``:
    ``model.json``, ``sentences.parquet`` (the labelled sentences) and ``scores.json``. Returns the model path.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ...models.chat_classifier import labelled_sentences, train_logreg
    from ...models.text_encoder import get_encoder
    from ...release import write_json_atomic
    from ...sources.transcripts import open_transcripts
    from ...sources.youcook2 import read_youcook2_annotations

    folder = Path(folder)
    model_path = folder / "model.json"
    folder.mkdir(parents=True, exist_ok=True)
    videos, bad = read_youcook2_annotations(cfg.youcook2)
    store = open_transcripts(cfg.youcook2_transcripts, folder, set(videos))
    rows, drops, counts = labelled_sentences(videos, store)
    encoder = get_encoder(cfg.embedding_model, cfg.device, cfg.encode_batch_size)
    model = train_logreg(rows, encoder, threshold=cfg.chat_threshold)
    table = pa.Table.from_pylist([{k: r[k] for k in ("video_id", "recipe_type", "sentence", "start", "end", "label",
                                                      "split")} for r in rows])
    pq.write_table(table, folder / "sentences.parquet")
    write_json_atomic(folder / "scores.json", {
        "scores": model.scores, "name": model.name, "C": model.C,
        "dropped_videos": dict(sorted(_reason_counts(list(bad) + list(drops)).items())),
        "counts": {str(k): v for k, v in dict(counts).items()}})
    model.save(model_path)  # written last: its presence marks the training complete
    return model_path


def _reason_counts(drops: list[Drop]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for d in drops:
        out[d.reason] += 1
    return dict(out)


class PickVideos(Step):
    """Lin et al., ACL 2020, §2, Table 1: per dish ``n_v = clamp(round(ρ · n_text), 3, 100)`` videos, ρ = 77,550 /
    48,852: the first candidates in rank order whose transcript survived (``dish_video_quota`` for the rest; counter
    ``videos_short`` when a dish gets fewer). A video listed under two dishes is kept in the first dish
    (``video_in_two_dishes``)."""

    name = "pick_videos"
    id_field = "_key"
    config_keys = ("video_ratio", "min_videos_per_dish", "max_videos_per_dish")

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        cfg = self.cfg
        by_dish: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
        for r in inputs.data.rows(["dish_id", "rank", "video_id", "n_text"]):
            by_dish[r["dish_id"]].append((r["rank"], r["video_id"], r["n_text"]))
        picked: dict[str, str] = {}
        elsewhere: dict[str, str] = {}
        short: dict[str, str] = {}
        owner: dict[str, str] = {}
        for dish in sorted(by_dish):
            cands = sorted(by_dish[dish])
            wanted = dish_ops.videos_per_dish(cands[0][2], cfg.video_ratio, cfg.min_videos_per_dish,
                                              cfg.max_videos_per_dish)
            got = 0
            for rank, vid, _ in cands:
                key = f"{dish}:{vid}"
                if vid in owner:
                    elsewhere[key] = owner[vid]
                elif got < wanted:
                    picked[key] = "picked"
                    owner[vid] = dish
                    got += 1
            if got < wanted:
                first = next(f"{dish}:{vid}" for _, vid, _ in cands if f"{dish}:{vid}" in picked) if got else None
                if first:
                    short[first] = f"{got} of {wanted}"
        return {"picked": picked, "elsewhere": elsewhere, "short": short}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            k = r["_key"]
            if k in self.state["elsewhere"]:
                out.drop(k, "video_in_two_dishes", f"kept in dish {self.state['elsewhere'][k]}")
            elif k not in self.state["picked"]:
                out.drop(k, "dish_video_quota", f"rank {r['rank']}")
            else:
                if k in self.state["short"]:
                    out.count("videos_short")
                out.keep(r)


class VideoTerms(Step):
    """Lin et al., ACL 2020, §2.3, the video's half of its ingredient terms: the ingredient terms among the NOUN/PROPN
    lemmas of its content sentences (``_video_terms``). Apart from ``video_recipe``, which intersects them with the dish
    vocabulary of the text recipes, so that an edit of a web page does not lemmatize the videos again."""

    name = "video_terms"
    version = "1"
    id_field = "_key"
    config_keys = ("spacy_model",)

    def setup(self, state: Any) -> None:
        from ...models.nlp import ContentLemmatizer

        self.lemmatize = ContentLemmatizer(self.cfg.spacy_model, pos=NOUN_POS)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            lemmas: set[str] = set()
            for s in self.lemmatize([c["text"] for c in r["content"]]):
                lemmas |= s
            out.keep({**r, "_video_terms": sorted(dish_ops.ingredient_terms(lemmas))})


class VideoRecipe(Step):
    """A picked video as a ``recipes`` row: content sentences are its instructions (with times); its ingredient
    terms are the dish vocabulary D ∩ the NOUN/PROPN lemmas of its content sentences (Lin et al., ACL 2020, §2.3;
    ``video_terms``)."""

    name = "video_recipe"
    version = "2"
    id_field = "_key"
    side_inputs = ("text",)
    config_keys = ()

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        from ...core.artefacts import save_json

        table = {k: sorted(v["terms"]) for k, v in _dish_table(inputs.side["text"]).items()}
        save_json(inputs.artefact_dir, "dish_terms", table)
        return {"dishes": len(table)}

    def setup(self, state: Any) -> None:
        from ...core.artefacts import artefact_dir, load_json

        self.vocab = {k: set(v) for k, v in load_json(artefact_dir(state), "dish_terms").items()}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            content = r["content"]
            terms = sorted(self.vocab.get(r["dish_id"], set()) & set(r["_video_terms"]))
            out.keep({
                "recipe_id": f"v:{r['video_id']}", "dish_id": r["dish_id"], "dish_name": r["dish_name"],
                "modality": "video", "title": r["title"], "url": f"https://www.youtube.com/watch?v={r['video_id']}",
                "language": "en", "ingredients": [], "ingredient_terms": terms,
                "instructions": [c["text"] for c in content], "step_index": list(range(len(content))),
                "section": [""] * len(content), "start": [float(c["start"]) for c in content],
                "end": [float(c["end"]) for c in content], "num_chat_removed": int(r["num_chat_removed"]),
                "source": {"extraction": "transcript", "warc_filename": "", "warc_record_offset": -1,
                           "warc_record_id": "", "recipe_index_in_page": 0, "asr_source": r["asr_source"],
                           "chat_classifier": r["chat_classifier"]},
                "split": r["split"], "rank": int(r["rank"])})


# ============================================================================ pairs pipeline (§2.3, §3.1)
RECIPE_COLUMNS = ["recipe_id", "dish_id", "dish_name", "modality", "instructions", "start", "end",
                  "ingredient_terms", "split"]


def _recipes_by_dish(side: dict[str, Any]) -> dict[str, list[Row]]:
    by_dish: dict[str, list[Row]] = defaultdict(list)
    for name in ("text", "videos"):
        for r in side[name].rows(RECIPE_COLUMNS):
            by_dish[r["dish_id"]].append(r)
    return by_dish


class DishPairsSource(Source):
    """Within-dish recipe pairs (Lin et al., ACL 2020, §2.3, A.1.4): text-text and text-video pairs with ingredient
    overlap >= 0.70, video-video >= 0.90; text-text pairs also need instruction counts within a factor 2."""

    name = "dish_pairs"
    version = "1"
    side_inputs = ("text", "videos")
    rows_carry_content = True  # a pair holds both recipes' instructions, times and its ingredient match
    config_keys = ("text_match", "video_match", "max_length_ratio")

    def read(self) -> Iterator[Row | Drop | Count]:
        cfg = self.cfg
        for dish, recipes in sorted(_recipes_by_dish(self.side).items()):
            by_id = {r["recipe_id"]: r for r in recipes}
            kept, dropped = dish_ops.dish_pairs(
                [(r["recipe_id"], r["modality"], len(r["instructions"]), set(r["ingredient_terms"])) for r in recipes],
                cfg.text_match, cfg.video_match, cfg.max_length_ratio)
            for key, reason in dropped:
                yield Drop(f"{dish}:{key}", self.name, reason)
            for p in kept:
                a, b = by_id[p["recipe_a"]], by_id[p["recipe_b"]]
                yield {"pair_id": f"{dish}:{a['recipe_id']}|{b['recipe_id']}", "dish_id": dish,
                       "split": a["split"], "pair_type": p["pair_type"], "recipe_a": a["recipe_id"],
                       "recipe_b": b["recipe_id"], "a_instructions": a["instructions"],
                       "b_instructions": b["instructions"], "a_start": a["start"], "a_end": a["end"],
                       "b_start": b["start"], "b_end": b["end"], "ingredient_match": float(p["ingredient_match"])}


#: model name -> (source side, target side, pair type) of the directed alignments it produces (Lin et al., ACL 2020,
#: §3.1)
MODELS = {"text_text": "text_text", "video_video": "video_video", "text_to_video": "text_video",
          "video_to_text": "text_video"}


def _directions(pair_type: str) -> tuple[str, str]:
    """Models for (a -> b, b -> a): recipe a is the text side of a text-video pair (docs/corpora/marc.md, Outputs)."""
    if pair_type == "text_video":
        return "text_to_video", "video_to_text"
    return pair_type, pair_type


def _model_fingerprint(model: Any) -> str:
    return hash_obj(model.config.to_dict(), sorted(model.vocabulary.items()), model.keys.tobytes().hex()[:64],
                    float(model.t.sum()), sorted(model.jump.items()), len(model.keys))[:12]


class HmmIbm1Align(Step):
    """Lin et al., ACL 2020, §3.1 (Eq. 1, A.2): HMM over target instructions with IBM Model 1 emissions, trained by EM
    on the train-split pairs (``text_text`` and ``video_video`` on both directions, ``text_to_video`` and
    ``video_to_text`` one each), vocabulary cut-offs over the train split; posteriors for every pair of every split in
    both directions.

    ``aligner: best`` (default) is the preset that aligns best on real data (``HmmIbm1Config.best``, see
    ``builders.ops.hmm_ibm1.BEST_NOTE``); ``aligner: paper`` the paper's configuration.
    """

    name = "hmm_ibm1"
    version = "2"
    id_field = "pair_id"
    side_inputs = ("text", "videos")
    config_keys = ("aligner", "text_min_count", "video_min_count", "tokens", "spacy_model")

    def _config(self) -> Any:
        from ...ops.hmm_ibm1 import HmmIbm1Config

        return HmmIbm1Config.best() if self.cfg.aligner == "best" else HmmIbm1Config.paper()

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        from collections import Counter

        from ...ops.hmm_ibm1 import HmmIbm1

        from ...models.tokens import Tokenizer

        tok = Tokenizer(self.cfg.tokens, self.cfg.spacy_model)
        text_min, video_min = self.cfg.min_counts()
        counts = {"text": Counter(), "video": Counter()}
        raw_sizes = {}
        for side, modality in (("text", "text"), ("videos", "video")):
            for r in inputs.side[side].rows(["split", "instructions"]):
                if r["split"] == "train":
                    for toks in tok(r["instructions"]):
                        counts[modality].update(toks)
            raw_sizes[modality] = len(counts[modality])
        vocab_words = {"text": {w for w, c in counts["text"].items() if c >= text_min},
                       "video": {w for w, c in counts["video"].items() if c >= video_min}}
        vocabs = {"text_text": vocab_words["text"], "video_video": vocab_words["video"],
                  "text_to_video": vocab_words["text"] | vocab_words["video"],
                  "video_to_text": vocab_words["text"] | vocab_words["video"]}
        train: dict[str, list[tuple[list[list[str]], list[list[str]]]]] = defaultdict(list)
        for r in inputs.data.rows(["split", "pair_type", "a_instructions", "b_instructions"]):
            if r["split"] != "train":
                continue
            a, b = tok(r["a_instructions"]), tok(r["b_instructions"])
            fwd, bwd = _directions(r["pair_type"])
            train[fwd].append((a, b))
            train[bwd].append((b, a))
        models, names = {}, {}
        for name in MODELS:
            if not train.get(name):
                continue
            vocab = {w: i for i, w in enumerate(sorted(vocabs[name]))}
            model = HmmIbm1(self._config()).fit(train[name], vocabulary=vocab)
            models[name] = model
            names[name] = f"hmm_ibm1/{name}@{_model_fingerprint(model)}"
        info = {"names": names,
                "vocabulary": {"text": [raw_sizes["text"], len(vocab_words["text"]), text_min],
                               "video": [raw_sizes["video"], len(vocab_words["video"]), video_min]},
                "train_pairs": {k: len(v) for k, v in sorted(train.items())},
                "jump": {k: {str(d): round(p, 6) for d, p in sorted(m.jump.items())} for k, m in models.items()},
                "em_seconds": {k: round(m.timings.get("em", 0.0), 3) for k, m in models.items()}}
        from ...core.artefacts import save_arrays, save_json

        for name, model in models.items():
            arrays, meta = model.to_state()
            save_arrays(inputs.artefact_dir, f"model_{name}", arrays, meta)
        save_json(inputs.artefact_dir, "aligner_info", info)
        return {"names": names}

    def setup(self, state: Any) -> None:
        from ...core.artefacts import artefact_dir, load_arrays
        from ...ops.hmm_ibm1 import HmmIbm1

        root = artefact_dir(state)
        models = {}
        for name in state["names"]:
            arrays, meta = load_arrays(root, f"model_{name}", with_meta=True)
            models[name] = HmmIbm1.from_state(arrays, meta)
        self.state = {"models": models, "names": state["names"]}
        from ...models.tokens import Tokenizer

        self.tok = Tokenizer(self.cfg.tokens, self.cfg.spacy_model)

    def process(self, rows: list[Row], out: Out) -> None:
        models = self.state["models"]
        jobs: dict[str, list[tuple[int, str, list[list[str]], list[list[str]]]]] = defaultdict(list)
        tokens = []
        for i, r in enumerate(rows):
            a, b = self.tok(r["a_instructions"]), self.tok(r["b_instructions"])
            tokens.append((a, b))
            fwd, bwd = _directions(r["pair_type"])
            jobs[fwd].append((i, "a_to_b", a, b))
            jobs[bwd].append((i, "b_to_a", b, a))
        results: dict[tuple[int, str], Any] = {}
        for name, items in jobs.items():
            if name not in models:
                continue
            vocab = models[name].vocabulary
            for (i, direction, src, _), al in zip(items, models[name].align([(s, t) for _, _, s, t in items])):
                results[(i, direction)] = al
                out.count("empty_after_vocab", sum(1 for ins in src if not any(w in vocab for w in ins)))
        for i, r in enumerate(rows):
            fwd, bwd = _directions(r["pair_type"])
            missing = [n for n in (fwd, bwd) if n not in models]
            if missing:
                out.drop(r["pair_id"], "no_alignment_model", f"no train-split pairs for {', '.join(missing)}")
                continue
            ab, ba = results[(i, "a_to_b")], results[(i, "b_to_a")]
            if not (np.all(np.isfinite(ab.gamma)) and np.all(np.isfinite(ba.gamma))):
                out.drop(r["pair_id"], "alignment_numerical_error", "NaN or inf posterior")
                continue
            out.keep({**r, "a_to_b": ab.rows(), "b_to_a": ba.rows(), "model_a_to_b": self.state["names"][fwd],
                      "model_b_to_a": self.state["names"][bwd]})


# ============================================================================ dishes pipeline (§3.2)
class DishGraphSource(Source):
    """One row per dish: its instructions as nodes, ordered by (recipe_id, instruction_index), and one directed edge
    per source instruction to its argmax target (all pair types, both directions) weighted by the posterior."""

    name = "dish_graphs"
    version = "1"
    side_inputs = ("text", "videos", "pairs")
    rows_carry_content = True  # a dish's nodes (texts, times) and weighted edges
    config_keys = ()

    def read(self) -> Iterator[Row | Drop | Count]:
        by_dish = _recipes_by_dish(self.side)
        edges: dict[str, list[tuple[str, int, str, int, float]]] = defaultdict(list)
        for p in self.side["pairs"].rows(["dish_id", "recipe_a", "recipe_b", "a_to_b", "b_to_a"]):
            for src, dst, align in ((p["recipe_a"], p["recipe_b"], p["a_to_b"]),
                                    (p["recipe_b"], p["recipe_a"], p["b_to_a"])):
                for m, x in enumerate(align):
                    if x["target_index"] >= 0:
                        edges[p["dish_id"]].append((src, m, dst, x["target_index"], x["probability"]))
        for dish in sorted(by_dish):
            recipes = sorted(by_dish[dish], key=lambda r: r["recipe_id"])
            nodes, node_of = [], {}
            for r in recipes:
                video = r["modality"] == "video"
                for k, text in enumerate(r["instructions"]):
                    node_of[(r["recipe_id"], k)] = len(nodes)
                    nodes.append({"node_id": len(nodes), "recipe_id": r["recipe_id"], "modality": r["modality"],
                                  "instruction_index": k, "text": text,
                                  "start": float(r["start"][k]) if video else float("nan"),
                                  "end": float(r["end"][k]) if video else float("nan")})
            src, dst, w = [], [], []
            for a, m, b, n, prob in edges.get(dish, []):
                src.append(node_of[(a, m)])
                dst.append(node_of[(b, n)])
                w.append(float(prob))
            yield {"dish_id": dish, "dish_name": recipes[0]["dish_name"], "split": recipes[0]["split"],
                   "nodes": nodes, "src": src, "dst": dst, "weight": w}


class JointAlignment(Step):
    """Lin et al., ACL 2020, §3.2: edges with posterior > ``edge_threshold`` (0.5), undirected weight = mean of the
    directed ones, maximum spanning forest by Kruskal, and jointly-alignable sets (paths with at most one instruction
    per recipe)."""

    name = "joint_alignment"
    version = "1"
    id_field = "dish_id"
    config_keys = ("edge_threshold",)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            nodes = r["nodes"]
            codes = {rid: i for i, rid in enumerate(sorted({n["recipe_id"] for n in nodes}))}
            ja = joint_alignment(len(nodes), np.asarray([codes[n["recipe_id"]] for n in nodes], dtype=np.int64),
                                 np.asarray(r["src"], dtype=np.int64), np.asarray(r["dst"], dtype=np.int64),
                                 np.asarray(r["weight"], dtype=np.float64), self.cfg.edge_threshold,
                                 [n["modality"] == "video" for n in nodes])
            out.count("aligned_sets", len(ja.aligned_sets))
            out.keep({"dish_id": r["dish_id"], "dish_name": r["dish_name"], "split": r["split"], "nodes": nodes,
                      "forest_edges": [{"u": int(u), "v": int(v), "weight": float(w)} for u, v, w in ja.forest_edges],
                      "aligned_sets": [{"node_ids": list(s.node_ids), "min_weight": float(s.min_weight),
                                        "num_text": int(s.num_text), "num_video": int(s.num_video)}
                                       for s in ja.aligned_sets],
                      "edge_threshold": float(self.cfg.edge_threshold)})


def pipelines(cfg: MarcConfig, shard_size: int = 64) -> list[Pipeline]:
    """The four pipelines of the corpus, in run order. Pages and pairs are cheap per item: their shards are four
    times larger (at most 256 items, unless ``shard_size`` is larger)."""
    large = max(shard_size, min(256, 4 * shard_size))
    return [
        Pipeline("text", RecipePagesSource(cfg), [ParseRecipePages(cfg), SelectTextRecipes(cfg), IngredientTerms(cfg)],
                 shard_size=large),
        Pipeline("videos", VideoCandidatesSource(cfg),
                 [DishVideos(cfg), LoadTranscript(cfg), ChatFilter(cfg), PickVideos(cfg), VideoTerms(cfg),
                  VideoRecipe(cfg)], shard_size=shard_size),
        Pipeline("pairs", DishPairsSource(cfg), [HmmIbm1Align(cfg)], shard_size=large),
        Pipeline("dishes", DishGraphSource(cfg), [JointAlignment(cfg)], shard_size=shard_size),
    ]
