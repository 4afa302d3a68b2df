"""Protocol ``recipe_pages``: the Schema.org Recipe extraction scored against recipe-scrapers (docs/corpora/marc.md).

``python eval/run.py recipe_pages --gt <fixtures>/recipe_pages --json`` (no ``--pred``: the protocol runs the
toolkit's own extraction, :mod:`builders.sources.schema_org`, on the pages). Per page the record whose normalised
title equals the expected ``title`` is picked, else the first (records dropped for ``no_instructions`` included, so a
title is scored even when the instructions are missing); the title must match exactly after HTML unescape, NFKC and
whitespace collapse; the recipe-scrapers-compatible instruction list (section names and step names emitted as
recipe-scrapers does) is compared with ``instructions_list`` by exact list equality and multiset item P/R/F1 of
normalised items (:mod:`eval.metrics.extraction`).

Pages are grouped by the declared language of ``<key>.expected.json`` (``en`` prefix or other) and by the markup the
extraction found (``jsonld``: at least one JSON-LD Recipe node; ``microdata``: microdata Recipes only). The top-level
metrics are the means over the primary set **en_jsonld** (the 132 English JSON-LD pages of the fixture; reference
values (toolkit prototype): titles 131/132, exact lists 118/132, mean item F1 0.936, lower is a regression);
``metrics.groups`` holds the same metrics for every group (``en_microdata`` is the English microdata-only set, which
has no reference value). Pages without any Schema.org Recipe are not scored: ``counts.skip_reasons.no_schema_recipe``
(``counts.no_schema_recipe_en`` for English ones).

Language filter (Lin et al., ACL 2020, A.1.1): ``language_agreement`` is the fraction of pages with extracted
instructions where "py3langid says ``en``" (declared-language fallback under 20 characters) equals "the expected
``language`` starts with ``en``"; ``language_agreement_expected_text`` applies the same test to the joined
``instructions_list`` of every page (174/175 on the fixture, the miss being the mislabelled Norwegian page).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from builders.sources.html_pages import read_page
from builders.sources.schema_org import (
    Candidate,
    PageExtraction,
    detect_language,
    extract_recipes,
)
from eval.benchmarks.recipe_pages import PageCase, read_recipe_pages
from eval.metrics.extraction import (
    exact_list_match,
    item_scores,
    mean,
    pick_record,
    scrapers_instruction_list,
    titles_match,
)
from eval.registry import EvalError, EvalInputs, EvalResult, Protocol, register

PRIMARY_GROUP = "en_jsonld"
GROUPS = ("en_jsonld", "en_microdata", "other_jsonld", "other_microdata")
LANGUAGE_PREFIX = "en"


@dataclass(frozen=True)
class PageScore:
    """The scores of one page."""

    key: str
    group: str
    title_ok: bool
    exact: bool
    precision: float
    recall: float
    f1: float


def pick_candidate(extraction: PageExtraction, expected_title: str) -> Candidate | None:
    """The record whose normalised title equals the expected title, else the first; kept records before
    records dropped for missing instructions/title."""
    ordered = extraction.records + [c for c in extraction.candidates if c.drop_reason is not None]
    index = pick_record([c.title for c in ordered], expected_title)
    return None if index is None else ordered[index]


def is_declared_english(language: str | None) -> bool:
    """The expected ``language`` starts with ``en`` (``en``, ``en-US``, ``en_GB``; case-insensitive)."""
    return (language or "").strip().lower().startswith(LANGUAGE_PREFIX)


def score_page(case: PageCase, extraction: PageExtraction) -> PageScore | None:
    """One page's scores, or ``None`` for a page without any Schema.org Recipe."""
    if extraction.no_schema_recipe:
        return None
    markup = "jsonld" if extraction.has_jsonld_recipe else "microdata"
    group = f"{'en' if is_declared_english(case.language) else 'other'}_{markup}"
    cand = pick_candidate(extraction, case.title)
    title = cand.title if cand is not None else ""
    predicted = scrapers_instruction_list(cand.steps) if cand is not None else []
    scores = item_scores(predicted, case.instructions)
    return PageScore(case.key, group, titles_match(title, case.title), exact_list_match(predicted, case.instructions),
                     scores.precision, scores.recall, scores.f1)


def _group_metrics(scores: list[PageScore]) -> dict[str, float]:
    return {
        "title_accuracy": mean([float(s.title_ok) for s in scores]),
        "exact_list_accuracy": mean([float(s.exact) for s in scores]),
        "item_precision": mean([s.precision for s in scores]),
        "item_recall": mean([s.recall for s in scores]),
        "item_f1": mean([s.f1 for s in scores]),
    }


def _evaluate(inputs: EvalInputs) -> EvalResult:
    if inputs.pred is not None:
        raise EvalError("recipe_pages scores the toolkit's own extraction: it takes --gt only, no --pred")
    cases = read_recipe_pages(inputs.gt[0], inputs.warnings)
    scores: list[PageScore] = []
    skipped: Counter = Counter()
    counters: Counter = Counter()
    no_schema_en = 0
    lang_agree = lang_pages = text_agree = 0
    disagreements: list[str] = []
    for case in cases:
        declared_en = is_declared_english(case.language)
        detected = detect_language(" ".join(case.instructions), case.language)
        text_agree += (detected == LANGUAGE_PREFIX) == declared_en
        page = read_page(case.key, case.html_path)
        if not isinstance(page, dict):
            skipped[page.reason] += 1
            inputs.warnings.add(page.reason, f"{case.key}: {page.detail}")
            continue
        extraction = extract_recipes(page["html"], page["url"])
        counters.update(extraction.counters)
        score = score_page(case, extraction)
        if score is None:
            skipped["no_schema_recipe"] += 1
            no_schema_en += declared_en
            continue
        scores.append(score)
        cand = pick_candidate(extraction, case.title)
        if cand is not None and cand.steps:
            ours = detect_language(" ".join(s.text for s in cand.steps), cand.language)
            lang_pages += 1
            if (ours == LANGUAGE_PREFIX) == declared_en:
                lang_agree += 1
            else:
                disagreements.append(case.key)
    by_group = {g: [s for s in scores if s.group == g] for g in GROUPS}
    primary = by_group[PRIMARY_GROUP]
    if not primary:
        inputs.warnings.add("empty_primary_set", f"no page is declared English with a JSON-LD Recipe ({PRIMARY_GROUP})")
    metrics: dict[str, Any] = dict(_group_metrics(primary))
    metrics["language_agreement"] = lang_agree / lang_pages if lang_pages else float("nan")
    metrics["language_agreement_expected_text"] = text_agree / len(cases)
    metrics["groups"] = {g: _group_metrics(by_group[g]) for g in GROUPS}
    extra = {
        "pages": len(cases),
        "primary_group": PRIMARY_GROUP,
        "pages_by_group": {g: len(by_group[g]) for g in GROUPS},
        "titles_correct": sum(s.title_ok for s in primary),
        "exact_lists": sum(s.exact for s in primary),
        "no_schema_recipe": skipped["no_schema_recipe"],
        "no_schema_recipe_en": no_schema_en,
        "language_agree": lang_agree,
        "language_pages": lang_pages,
        "language_agree_expected_text": text_agree,
        "language_disagreements": disagreements,
        "title_mismatches": [s.key for s in primary if not s.title_ok],
        "list_mismatches": [s.key for s in primary if not s.exact],
        "extraction_counters": dict(sorted(counters.items())),
    }
    return EvalResult(metrics=metrics, items=len(primary), skipped=sum(skipped.values()),
                      skip_reasons=dict(skipped), extra_counts=extra)


RECIPE_PAGES = register(Protocol(
    name="recipe_pages",
    summary="Schema.org Recipe extraction vs recipe-scrapers on recipe_pages: titles, exact lists, item F1",
    evaluate=_evaluate,
    needs_pred=False,
    table_keys=("title_accuracy", "exact_list_accuracy", "item_f1", "language_agreement"),
))
