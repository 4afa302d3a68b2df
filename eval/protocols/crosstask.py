"""``crosstask``: CrossTask zero-shot step localisation, Average R@1 (docs/evaluation.md).

Recall is pooled inside each task and averaged over the tasks present; protocol ``sets`` (default) averages it over
``n_sets`` random sets of ``set_size`` videos (set i: ``random.seed(seed + i); random.sample(videos, k)`` in file
order), protocol ``all`` scores every video once. A ground-truth video without a prediction counts its annotated steps
as misses (``missing_video`` warning); a step left with no slot is not counted (``skip_reasons.step_without_slot``).
"""

from __future__ import annotations

import numpy as np

from eval.benchmarks.crosstask import read_crosstask_ground_truth
from eval.metrics.crosstask import (
    PROTOCOLS,
    average_recall,
    avg_r1_over_sets,
    sample_sets,
    task_recalls,
)
from eval.metrics.grounding import END_RULES
from eval.protocols.htstep import score_step_grounding
from eval.registry import EvalError, EvalInputs, EvalResult, Protocol, Variant, register


def _evaluate(inputs: EvalInputs) -> EvalResult:
    """Average R@1 over tasks (docs/evaluation.md)."""
    if inputs.pred is None:
        raise EvalError("crosstask needs --pred")
    settings = inputs.variant
    n_sets, set_size = int(settings["n_sets"]), int(settings["set_size"])
    if settings["protocol"] == "sets" and (n_sets < 1 or set_size < 1):
        raise EvalError(f"--variant n_sets={n_sets} set_size={set_size}: both must be at least 1")
    w = inputs.warnings
    videos, fmt = read_crosstask_ground_truth(inputs.gt[0])
    if fmt == "release":
        w.add("no_duration", "the CrossTask release layout has no video durations: T = score-matrix rows, and time "
              "predictions are not clamped above")
    scores = score_step_grounding(videos, inputs.pred, settings["end"], w, reject_multi_one=True)

    tasks = list(dict.fromkeys(v.group for v in videos))
    task_index = {t: i for i, t in enumerate(tasks)}
    task_of = np.asarray([task_index[v.group] for v in videos], dtype=np.int64)
    hits = np.asarray([s.hits for s in scores], dtype=np.float64)
    annotated = np.asarray([s.annotated for s in scores], dtype=np.float64)
    no_slot = np.asarray([s.no_slot for s in scores], dtype=np.int64)

    if settings["protocol"] == "all":
        members = np.arange(len(videos))
        recalls = task_recalls(hits, annotated, task_of, len(tasks))
        empty = [tasks[c] for c in range(len(tasks)) if np.isnan(recalls[c])]
        for t in empty:
            w.add("task_without_annotated_step", f"task {t} has no annotated step: skipped")
        avg = average_recall(recalls)
    else:
        sets = sample_sets(len(videos), n_sets, set_size, int(settings["seed"]))
        members = np.unique(np.concatenate([np.asarray(s, dtype=np.int64) for s in sets]))
        for i, s in enumerate(sets):
            idx = np.asarray(s, dtype=np.int64)
            present = np.unique(task_of[idx])
            rec = task_recalls(hits[idx], annotated[idx], task_of[idx], len(tasks))
            for c in present:
                if np.isnan(rec[c]):
                    w.add("task_without_annotated_step", f"set {i}: task {tasks[c]} has no annotated step: skipped")
        avg, _ = avg_r1_over_sets(hits, annotated, task_of, len(tasks), sets)
    if not np.isfinite(avg):
        w.add("no_annotated_step", "no annotated (video, step) pair: Avg R@1 is undefined (null)")
    n_no_slot = int(no_slot[members].sum())
    return EvalResult(
        metrics={"avg_r1": avg},
        items=int(annotated[members].sum()),
        skipped=n_no_slot,
        skip_reasons={"step_without_slot": n_no_slot} if n_no_slot else {},
        resolved={"gt_format": fmt},
    )


register(
    Protocol(
        name="crosstask",
        summary="CrossTask zero-shot step localisation: Average R@1 over tasks",
        evaluate=_evaluate,
        variants=(
            Variant("protocol", "sets", "sets: mean over random video sets; all: every video once", choices=PROTOCOLS),
            Variant("end", "exclusive", "segment end rule: exclusive Y[floor(s):ceil(e)] (original CrossTask), "
                    "inclusive Y[floor(s):ceil(e)+1] (the public 20-set script)", choices=END_RULES),
            Variant("n_sets", 20, "number of random sets (protocol=sets)"),
            Variant("set_size", 1850, "videos per set, min(set_size, n) (protocol=sets)"),
            Variant("seed", 0, "set i uses random.seed(seed + i) (protocol=sets)"),
        ),
        table_keys=("avg_r1",),
    )
)
