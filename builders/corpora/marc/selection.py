"""Recipe selection by dish in bounded memory (docs/corpora/marc.md, Pipeline steps 2-4; Lin et al., ACL 2020, §2,
A.1.1): the decisions of :func:`builders.corpora.marc.text.select_text_recipes` taken over a working store on disk.

The per-recipe work (instruction units, language identification, the content digest) is done per shard before, by
:class:`builders.corpora.marc.text.RecipeInstructions`; what must be global is computed here from small facts of each
recipe, streamed into an SQLite file (:class:`Selection`):

1. ``non_english`` and ``title_too_long`` are decided as a recipe's facts arrive;
2. ``duplicate_recipe``: the survivors read back in (url, warc file, offset, recipe id, arrival) order (SQLite sorts on
   disk), the first of each content digest and recipe id kept; the title word counts of the kept ones accumulate;
3. ``rare_title_word`` (the cut over those counts) and ``too_few_steps``;
4. dishes, read back dish by dish: ``dish_too_small``, ``dish_capped``, the dish's name, then the dish splits.

Memory holds the title-word counts, the kept dish ids and one dish's members; the store holds a few fields a recipe.
Each recipe's outcome (its drop, or its dish, dish name and split) is a row of the store's ``outcome`` table, which the
step looks up by the shard's keys: a shard is redone when its recipes' outcomes changed, so an edited page redoes its
shard and the shards of the recipes whose outcome it changed (its dish's when the dish's members or name change).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ...ops import dishes

STAGE = "text_recipes"
#: the facts of one recipe that the global decisions read
FACT_FIELDS = ("key", "recipe_id", "title", "url", "page_url", "warc_filename", "offset", "language", "content",
               "n_units")
_SCHEMA = """
CREATE TABLE facts (seq INTEGER PRIMARY KEY, key BLOB, recipe_id TEXT, title BLOB, url BLOB, page_url BLOB,
                    warc_filename BLOB, offset INTEGER, content BLOB, n_units INTEGER);
CREATE TABLE outcome (key BLOB PRIMARY KEY, ord INTEGER, item_id TEXT, reason TEXT, detail BLOB, dish_id BLOB,
                      dish_name BLOB, split TEXT);
CREATE TABLE seen_content (content BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE seen_id (recipe_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE uniq (pos INTEGER PRIMARY KEY, seq INTEGER);
CREATE TABLE survivors (pos INTEGER PRIMARY KEY, seq INTEGER, dish_id BLOB);
CREATE TABLE dishes (dish_id BLOB PRIMARY KEY, split TEXT) WITHOUT ROWID;
"""


def _b(text: str) -> bytes:
    """Text as stored: UTF-8 keeping lone surrogates (a JSON-LD escape), whose byte order is the code-point order."""
    return text.encode("utf-8", "surrogatepass")


def _s(blob: bytes | None) -> str:
    return (blob or b"").decode("utf-8", "surrogatepass")


def content_digest(title: str, normalised_instructions: Iterable[str]) -> str:
    """The digest of a recipe's content for ``duplicate_recipe``: its casefolded title and normalised instructions."""
    text = json.dumps([title.casefold(), list(normalised_instructions)], ensure_ascii=True)
    return hashlib.blake2b(text.encode("ascii"), digest_size=16).hexdigest()


def drop_detail(url: str, page_url: str, detail: str) -> str:
    """See :func:`builders.corpora.marc.text.drop_detail` (the URL its id hashes, then the page's)."""
    from .text import drop_detail as detail_of

    return detail_of({"url": url, "page_url": page_url}, detail)


class Selection:
    """The working store of the recipe selection: ``add`` each recipe's facts, then ``decide`` once."""

    def __init__(self, path: str | Path = ":memory:"):
        self.path = str(path)
        self.con = sqlite3.connect(self.path)
        self.con.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA temp_store=FILE;"
                               "PRAGMA cache_size=-65536;" + _SCHEMA)
        self._ord = 0
        self._n_unique = 0
        self._facts: list[tuple] = []
        self._drops: list[tuple] = []

    # ------------------------------------------------------------------ filters 1-2, as the facts arrive
    def add(self, f: Mapping[str, Any], cfg: Any) -> None:
        """One recipe's facts (:data:`FACT_FIELDS`): the English and title-length filters now, the rest in
        :meth:`decide`. ``language`` is the detected language of the joined instructions."""
        title = f["title"]
        if f["language"] != "en":
            self._drop(f, "non_english", f"{f['language'] or 'unknown'}: {title}")
        elif len(title.split()) > cfg.max_title_words:
            self._drop(f, "title_too_long", title)
        else:
            self._facts.append((_b(f["key"]), f["recipe_id"], _b(title), _b(f["url"]), _b(f["page_url"]),
                                _b(f["warc_filename"]), int(f["offset"]), bytes.fromhex(f["content"]),
                                int(f["n_units"])))
        if len(self._facts) + len(self._drops) >= 4096:
            self._flush()

    def _drop(self, f: Mapping[str, Any], reason: str, detail: str) -> None:
        self._ord += 1
        self._drops.append((_b(f["key"]), self._ord, f["recipe_id"], reason,
                            _b(drop_detail(f["id_url"], f["page_url"], detail)), None, None, None))
        if len(self._drops) >= 4096:
            self._flush()

    def _flush(self) -> None:
        self.con.executemany("INSERT INTO facts (key, recipe_id, title, url, page_url, warc_filename, offset, content,"
                             " n_units) VALUES (?,?,?,?,?,?,?,?,?)", self._facts)
        self.con.executemany("INSERT OR REPLACE INTO outcome VALUES (?,?,?,?,?,?,?,?)", self._drops)
        self._facts, self._drops = [], []

    # ------------------------------------------------------------------ filters 3-5, dishes and splits
    def decide(self, cfg: Any) -> Counter:
        """The decisions over every added recipe; returns the counts (drops by reason, ``kept``, ``dishes``)."""
        self._flush()
        con = self.con
        freq: Counter = Counter()
        # 3. duplicates, first in (url, warc file, offset) order (SQLite sorts on disk; only other tables are written
        # while the sorted facts are read)
        unique: list[tuple[int, int]] = []
        cur = con.execute("SELECT seq, key, recipe_id, title, url, page_url, content FROM facts "
                          "ORDER BY url, warc_filename, offset, recipe_id, seq")
        for seq, key, rid, title, url, page_url, content in cur:
            fresh = con.execute("INSERT OR IGNORE INTO seen_content VALUES (?)", (content,)).rowcount
            if fresh and con.execute("INSERT OR IGNORE INTO seen_id VALUES (?)", (rid,)).rowcount:
                unique.append((len(unique) + 1 + self._n_unique, seq))
                freq.update(dishes.title_words(_s(title)))
            else:
                if fresh:  # new content under a seen id: the content is not "seen" (only kept recipes' are)
                    con.execute("DELETE FROM seen_content WHERE content = ?", (content,))
                self._drop({"key": _s(key), "recipe_id": rid, "id_url": _s(url) or _s(page_url),
                            "page_url": _s(page_url)}, "duplicate_recipe", _s(title))
            if len(unique) >= 4096:
                self._keep_unique(unique)
        self._keep_unique(unique)
        self._flush()
        # 4. common title words over the survivors of 1-3; 5. at least min_steps instructions
        cut = dishes.title_word_cut(freq, cfg.title_word_quantile)
        survivors: list[tuple[int, int, bytes]] = []
        for p, seq, key, rid, title, url, page_url, n_units in con.execute(
                "SELECT u.pos, f.seq, f.key, f.recipe_id, f.title, f.url, f.page_url, f.n_units FROM uniq u "
                "JOIN facts f ON f.seq = u.seq ORDER BY u.pos"):
            t = _s(title)
            f = {"key": _s(key), "recipe_id": rid, "id_url": _s(url) or _s(page_url), "page_url": _s(page_url)}
            if not dishes.title_passes(dishes.title_words(t), freq, cut):
                self._drop(f, "rare_title_word", t)
            elif n_units < cfg.min_steps:
                self._drop(f, "too_few_steps", f"{n_units} instructions: {t}")
            else:
                survivors.append((p, seq, _b(dishes.dish_id(t))))
            if len(survivors) >= 4096:
                con.executemany("INSERT INTO survivors VALUES (?,?,?)", survivors)
                survivors = []
        con.executemany("INSERT INTO survivors VALUES (?,?,?)", survivors)
        self._flush()
        con.execute("CREATE INDEX survivors_dish ON survivors (dish_id, pos)")
        kept_dishes = self._dishes(cfg)
        splits = dishes.dish_splits(kept_dishes, cfg.test_dishes, cfg.validation_dishes, cfg.paper_dishes)
        con.executemany("INSERT INTO dishes VALUES (?,?)", ((_b(d), s) for d, s in splits.items()))
        con.commit()
        counts: Counter = Counter(dict(con.execute("SELECT reason, COUNT(*) FROM outcome WHERE reason IS NOT NULL "
                                                   "GROUP BY reason").fetchall()))
        counts["kept"] = con.execute("SELECT COUNT(*) FROM outcome WHERE reason IS NULL").fetchone()[0]
        counts["dishes"] = len(kept_dishes)
        return counts

    def _keep_unique(self, unique: list[tuple[int, int]]) -> None:
        self.con.executemany("INSERT INTO uniq VALUES (?,?)", unique)
        self._n_unique += len(unique)
        unique.clear()

    def _dishes(self, cfg: Any) -> list[str]:
        """Dishes in the order of their first survivor: too small, capped, named by their first survivor's title."""
        con = self.con
        kept: list[str] = []
        order = con.execute("SELECT dish_id, MIN(pos) AS first FROM survivors GROUP BY dish_id ORDER BY first")
        for (dish_b, _first) in order.fetchall():
            members = con.execute(
                "SELECT f.key, f.recipe_id, f.title, f.url, f.page_url FROM survivors s JOIN facts f ON f.seq = s.seq "
                "WHERE s.dish_id = ? ORDER BY s.pos", (dish_b,)).fetchall()
            dish = _s(dish_b)
            facts = [{"key": _s(k), "recipe_id": rid, "id_url": _s(u) or _s(pu), "page_url": _s(pu)}
                     for k, rid, _t, u, pu in members]
            if len(members) < cfg.min_recipes_per_dish:
                for f in facts:
                    self._drop(f, "dish_too_small", f"{dish}: {len(members)} recipes")
                self._flush()
                continue
            capped = set(dishes.cap_recipes([f["recipe_id"] for f in facts], cfg.max_recipes_per_dish))
            for f in facts:
                if f["recipe_id"] not in capped:
                    self._drop(f, "dish_capped", dish)
            name = next(t for (_k, rid, t, _u, _pu) in members if rid in capped)
            self._flush()
            con.executemany("INSERT OR REPLACE INTO outcome VALUES (?,?,?,?,?,?,?,?)",
                            [(_b(f["key"]), None, f["recipe_id"], None, None, dish_b, name, None)
                             for f in facts if f["recipe_id"] in capped])
            kept.append(dish)
        return kept

    # ------------------------------------------------------------------ reading the outcome
    def drops(self) -> Iterator[tuple[str, str, str, str]]:
        """(key, item id, reason, detail) of every drop, in the order the decisions were taken."""
        for key, rid, reason, detail in self.con.execute(
                "SELECT key, item_id, reason, detail FROM outcome WHERE reason IS NOT NULL ORDER BY ord"):
            yield _s(key), rid, reason, _s(detail)

    def close(self) -> None:
        self.con.close()


class Outcomes:
    """Read-only look-ups in a decided store (one connection a process)."""

    def __init__(self, path: str | Path):
        self.con = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro&immutable=1", uri=True,
                                   check_same_thread=False)

    @classmethod
    def of(cls, selection: Selection) -> "Outcomes":
        """Look-ups in a store decided in this process (an in-memory one)."""
        self = cls.__new__(cls)
        self.con = selection.con
        return self

    def lookup(self, keys: list[str]) -> dict[str, tuple]:
        """``key -> ("drop", item id, reason, detail)`` or ``("keep", dish id, dish name, split)``; a key the
        store does not hold is absent."""
        out: dict[str, tuple] = {}
        for i in range(0, len(keys), 500):
            chunk = [_b(k) for k in keys[i:i + 500]]
            q = ("SELECT o.key, o.item_id, o.reason, o.detail, o.dish_id, o.dish_name, d.split FROM outcome o "
                 "LEFT JOIN dishes d ON d.dish_id = o.dish_id WHERE o.key IN (%s)" % ",".join("?" * len(chunk)))
            for key, rid, reason, detail, dish, name, split in self.con.execute(q, chunk):
                out[_s(key)] = (("drop", rid, reason, _s(detail)) if reason is not None
                                else ("keep", _s(dish), _s(name), split))
        return out

    def close(self) -> None:
        self.con.close()
