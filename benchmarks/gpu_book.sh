#!/usr/bin/env bash
# The one prepared GPU check: the 12-layer book (preset mpnet), the two multilingual-e5-small books (presets e5-zh and
# e5-en, their fine-tuning settings chosen on the dev split first), the Chinese character model at GPU size and its
# book, the sweep benchmark and the pruning benchmark, each timed.
#
#   HEADLAB_CACHE=/path/to/cache OUT=/path/to/results benchmarks/gpu_book.sh
#
# The GPU machine may have no network, so nothing is installed or downloaded here. It needs:
#   .venv/              a venv with a CUDA build of torch and this package's dependencies (`make venv TORCH=...`),
#                       or PY=/path/to/python: any Python that imports them (e.g. the machine's own torch, with the
#                       missing packages on PYTHONPATH)
#   $HEADLAB_CACHE      a cache that already holds the assets (`python -m headlab.inputs fetch mpnet minilm stsb-en
#                       pku-1998 stsb-zh e5-small`, and jieba's dictionary comes with the venv),
#                       plus the book's JavaScript, fetched by one `make book` run wherever there is network)
# Results land in $OUT (default gpu-out/): timings.txt, one log per step, the built book and its CSV tables.
#
#   PRESETS="default zh-char e5-zh e5-en" HEADLAB_CACHE=... benchmarks/gpu_book.sh
# builds only the book of those presets on the GPU, as one site ($OUT/site/_build/html, tables in $OUT/runs), and
# stops there: what .github/workflows/book.yml runs on a GPU runner (then `make dist BOOK_DIR=$OUT/site
# RUN_DIR=$OUT/runs`). SITE=0 executes the pages and writes the tables and timings but builds no site (`--no-site`:
# no jupyter-book needed), as on the lent H200 of issue #51, whose assets benchmarks/gpu_carry.py packs; LANES=N runs
# N notebooks at a time (default 2: headlab.book's --lanes).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${HEADLAB_CACHE:?set HEADLAB_CACHE to a cache that holds the assets}"
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export HEADLAB_NO_NETWORK=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # this copy of headlab, wherever the venv's editable install points
PY=${PY:-.venv/bin/python}
SITE=${SITE:-1}

# Fail in seconds, not after a fine-tune, when the GPU or an asset is missing.
nvidia-smi > "$OUT/gpu.txt" 2>&1
# (a PRESETS build checks its own presets' assets as it starts)
ASSETS=$([ -n "${PRESETS:-}" ] || echo "mpnet minilm stsb-en pku-1998 stsb-zh e5-small") $PY - <<'EOF' 2>&1 | tee -a "$OUT/gpu.txt" || exit 1
import os
import torch
from headlab.inputs.assets import asset_path
assert torch.cuda.is_available(), f"torch {torch.__version__} sees no CUDA GPU"
print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
for name in os.environ["ASSETS"].split():
    asset_path(name, fetch=False)  # raises, naming the asset, if it is not in the cache
EOF

status=0
timed() {  # timed NAME COMMAND...: run it with its output in $OUT/NAME.log, and its wall time in timings.txt
    local name=$1; shift
    TIMEFORMAT="$name: %R s wall, %U s user"
    { time "$@" > "$OUT/$name.log" 2>&1; } 2>> "$OUT/timings.txt" \
        || { echo "$name failed (see $name.log)" >> "$OUT/timings.txt"; status=1; }
}

if [ -n "${PRESETS:-}" ]; then  # the book of these presets as one site, and nothing else
    # shellcheck disable=SC2086  # PRESETS is a list of names
    timed book_presets $PY -m headlab.book --presets $PRESETS --set DEVICE=cuda --work "$OUT/site" --run-dir "$OUT/runs" \
        $([ "$SITE" = 0 ] && echo --no-site) ${LANES:+--lanes "$LANES"}
    cat "$OUT/timings.txt"
    tail -n 5 "$OUT/book_presets.log"
    exit $status
fi

# The whole book on all-mpnet-base-v2 (12 x 12 heads): fine-tune once, every notebook, the static site.
timed book $PY -m headlab.book --preset mpnet --work "$OUT/book" --run-dir "$OUT/runs"
# multilingual-e5-small (12 x 12 heads), in Chinese and in English: the fine-tuning settings are chosen on the dev split
# (headlab.book.tuning, the preset's grid), then the book runs with the chosen LR and EPOCHS.
chosen() {  # chosen TABLE: the --set options for the row the tuning chose
    $PY -c "import pandas as pd; r = pd.read_csv('$1').query('chosen').iloc[0]; print(f'--set LR={r.lr:g} --set EPOCHS={int(r.epochs)}')"
}
for preset in e5-zh e5-en; do
    timed "tune_$preset" $PY -m headlab.book.tuning "$preset" --device cuda --out "$OUT/tuning-$preset.csv"
    timed "book_$preset" $PY -m headlab.book --preset "$preset" --set DEVICE=cuda $(chosen "$OUT/tuning-$preset.csv") \
        --work "$OUT/book-$preset" --run-dir "$OUT/runs-$preset"
done
# The character-level Chinese BERT at GPU size (zh-char-gpu: 12 x 12 heads, hidden 288, 6000 steps of 128 x 128),
# then the whole book on it; the model folder lands in the cache, its report in the log.
timed pretrain_zh $PY -m headlab.models zh-char-gpu --device cuda
timed book_zh $PY -m headlab.book --preset zh-char --set MODEL=zh-char-gpu --set DEVICE=cuda --work "$OUT/book-zh" --run-dir "$OUT/runs-zh"
# headlab's sweep engine against the naive loop (default model), 8 masks per forward pass.
timed sweep_speed $PY benchmarks/sweep_speed.py --device cuda --masks-per-pass 8 --naive-sample 8

# a pruned model against the unpruned one (half the heads, least important on the dev split), pairs per second
timed prune_speed $PY benchmarks/prune_speed.py --device cuda --batch-sizes 1 64 256 --out "$OUT/prune_speed.csv"

cat "$OUT/timings.txt"
tail -n 12 "$OUT/sweep_speed.log"
tail -n 3 "$OUT/prune_speed.log"
exit $status
