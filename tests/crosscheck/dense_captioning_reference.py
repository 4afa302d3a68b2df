"""Cross-check ``eval/run.py densevid`` and ``soda`` against the upstream reference evaluators, side by side.

Not part of the test suite and nothing upstream is vendored: point it at checkouts of the reference code and it runs
both on the same files and prints the largest absolute difference per metric.

    python tests/crosscheck/dense_captioning_reference.py \\
        --densevid PDVC/densevid_eval3 --soda SODA_CHECKOUT \\
        --gt ../shared/data/youcook2/yc2_val_pdvc_format.json --pred PRED.json [--hash-seeds 0 1 2]

``--densevid`` holds ``evaluate2018.py`` and ``evaluate2021.py`` (ttengwang/PDVC ``densevid_eval3``, copies of
ranjaykrishna/densevid_eval @deba7d7 and @9d4045a); ``--soda`` is fujiso/SODA @9cb3e2c (evaluation-only licence:
run, never copied). The references batch their PTB tokenization by ``list(set(video ids))``, so they are run under
each ``PYTHONHASHSEED`` given (``../shared/specs/evaluation.md`` §6(c)).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

DENSEVID_SNIPPET = r"""
import contextlib, io, json, random, sys, importlib.util
path, gt, pred, version = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("ref_eval", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
random.seed(0)
with contextlib.redirect_stdout(io.StringIO()):
    ev = mod.ANETcaptions(ground_truth_filenames=[gt], prediction_filename=pred, tious=[0.3, 0.5, 0.7, 0.9],
                          max_proposals=1000, verbose=True)
    ev.evaluate()
out = {k: [float(x) for x in v] for k, v in ev.scores.items()}
print(json.dumps(out))
"""

SODA_SNIPPET = r"""
import contextlib, io, json, sys
soda_dir, gt, pred = sys.argv[1:4]
sys.path.insert(0, soda_dir)
from dataset import ANETCaptions
from soda import SODA
res = {}
for kind in ("c", "d"):
    with contextlib.redirect_stdout(io.StringIO()):
        data = ANETCaptions.from_load_files([gt], pred, multi_reference=False, verbose=False)
        data.preprocess()
        res[kind] = [float(x) for x in SODA(data, soda_type=kind, tious=None, scorer="Meteor").evaluate()["Meteor"]]
print(json.dumps(res))
"""


def run_reference(snippet: str, args: list[str], hash_seed: int) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    out = subprocess.run([sys.executable, "-c", snippet, *args], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_ours(protocol: str, gt: str, pred: str, *variants: str) -> dict:
    cmd = [sys.executable, str(REPO / "eval" / "run.py"), protocol, "--gt", gt, "--pred", pred, "--json"]
    for v in variants:
        cmd += ["--variant", v]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--densevid", type=Path, required=True)
    ap.add_argument("--soda", type=Path, required=True)
    ap.add_argument("--gt", required=True)
    ap.add_argument("--pred", required=True)
    ap.add_argument("--hash-seeds", type=int, nargs="+", default=[0])
    args = ap.parse_args()

    ours18 = run_ours("densevid", args.gt, args.pred)["metrics"]
    ours21 = run_ours("densevid", args.gt, args.pred, "garbage=2021")["metrics"]
    ours_soda = run_ours("soda", args.gt, args.pred)["metrics"]
    tious = ["0.3", "0.5", "0.7", "0.9"]
    names = {"METEOR": "meteor", "CIDEr": "cider", "Bleu_4": "bleu4", "Precision": "precision", "Recall": "recall"}
    report = {}
    for seed in args.hash_seeds:
        for version, ours in (("2018", ours18), ("2021", ours21)):
            ref = run_reference(DENSEVID_SNIPPET, [str(args.densevid / f"evaluate{version}.py"), args.gt, args.pred,
                                                   version], seed)
            for ref_key, key in names.items():
                diffs = [abs(ref[ref_key][i] - ours["per_tiou"][t][key]) for i, t in enumerate(tious)]
                diffs.append(abs(sum(ref[ref_key]) / 4 - ours[key]))
                report[f"densevid{version}/{key}/hash{seed}"] = (max(diffs), ours[key], sum(ref[ref_key]) / 4)
        ref = run_reference(SODA_SNIPPET, [str(args.soda), args.gt, args.pred], seed)
        for kind in ("c", "d"):
            mine = ours_soda[f"soda_{kind}"]
            for i, key in enumerate(("precision", "recall", "f1")):
                report[f"soda_{kind}/{key}/hash{seed}"] = (abs(ref[kind][i] - mine[key]), mine[key], ref[kind][i])
    worst = 0.0
    for name, (diff, mine, theirs) in report.items():
        worst = max(worst, diff)
        print(f"{name:<32} ours {mine:.9f}  reference {theirs:.9f}  |diff| {diff:.2e}")
    print(f"largest |difference|: {worst:.3e}")
    return 0 if worst <= 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
