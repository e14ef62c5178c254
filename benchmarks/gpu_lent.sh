#!/usr/bin/env bash
# The default preset's whole book on a lent GPU machine that has no network and takes at most 64 MiB along per call
# (issue #51 item 4; the device tool of this workplace): two calls, because the trimmed model (51.6 MiB packed) and
# the notebook stack (45 MiB of wheels, 33 of them vl-convert) do not fit into one; the machine keeps what the first
# call wrote while it stays warm (30 s), so the second call must follow at once.
#
#   benchmarks/gpu_lent.sh prepare   # here, with network and .venv: fills .gpu/ (ignored by git)
#   bash .gpu/gpu_lent.sh unpack     # device call 1, carry [".gpu/assets", ".gpu/gpu_lent.sh"]: checks the GPU,
#                                    #   unpacks the assets into /tmp/hlcache there
#   bash .gpu/gpu_lent.sh book       # device call 2 at once, carry [".gpu/repo", ".gpu/whl", ".gpu/gpu_lent.sh",
#                                    #   ".gpu/commit"], timeout 540 s: installs the wheels, runs benchmarks/gpu_book.sh
#                                    #   (PRESETS=default SITE=0 LANES=4) and returns <= 8 files in $OUT
#
# prepare: benchmarks/gpu_carry.py prepare (minilm trimmed to the rows STS-B uses and checked equal to the full
# model, packed with stsb-en), the wheels of everything the notebooks import that the machine's image lacks (for its
# Python 3.12), and this commit's code as a shallow clone (its timings name the commit). The versions are those of
# the venv the book is built with here.
set -uo pipefail
G=.gpu
WHEELS="papermill==2.7.0 nbformat==5.11.1 nbclient==0.11.0 fastjsonschema==2.22.3 entrypoints==0.4.2 tenacity==9.2.1
ipykernel==7.4.0 ipython==9.18.1 ipython_pygments_lexers==1.1.1 jupyter_client==8.10.0 jupyter_core==5.9.1
pyzmq==27.3.0 tornado==6.6.1 traitlets==5.16.1 comm==0.2.3 debugpy==1.8.22 matplotlib-inline==0.2.2
nest-asyncio2==1.7.4 prompt_toolkit==3.0.53 wcwidth==0.9.4 pexpect==4.9.0 ptyprocess==0.7.0 stack-data==0.6.3
executing==2.3.0 asttokens==3.0.2 pure_eval==0.2.4 platformdirs==4.14.9 jsonschema==4.26.0
jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 altair==6.3.0 narwhals==2.29.0
vl-convert-python==1.9.0.post1 ipywidgets==8.1.9 jupyterlab_widgets==3.0.17 bertviz==1.4.1 anywidget==0.11.0
psygnal==0.16.1 typing_extensions==4.16.0 psutil==7.2.2"
LIMIT=${LIMIT:-460}  # seconds the book may run on the device before it is stopped, so that its tables come back

case "${1:-}" in
prepare)
    cd "$(dirname "$0")/.." || exit 1
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
    mkdir -p "$G/assets" "$G/whl"
    [ -f "$G/assets/default-assets.tar.xz" ] || HEADLAB_NO_NETWORK=1 PYTHONPATH=$PWD \
        .venv/bin/python benchmarks/gpu_carry.py prepare --out "$G/assets" || exit 1
    cp benchmarks/gpu_lent.sh "$G/" && cp benchmarks/gpu_carry.py "$G/assets/"
    # shellcheck disable=SC2086  # WHEELS is a list
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$G/whl" $WHEELS || exit 1
    rm -rf "$G/repo" && git clone -q --depth 1 "file://$PWD" "$G/repo" && git -C "$G/repo" checkout -q "$(git rev-parse HEAD)"
    git rev-parse --short HEAD > "$G/commit"
    du -sh "$G"/*
    ;;
unpack)  # device call 1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys, torch, transformers, numpy, pandas, scipy
print(sys.version.split()[0], torch.__version__, transformers.__version__, numpy.__version__, pandas.__version__,
      scipy.__version__, torch.cuda.get_device_name())"
    mkdir -p /tmp/hlcache
    HEADLAB_CACHE=/tmp/hlcache python3 "$G/assets/gpu_carry.py" unpack "$G/assets/default-assets.tar.xz"
    ;;
book)  # device call 2
    : "${OUT:?}"
    root=$PWD
    export HEADLAB_CACHE=/tmp/hlcache PYTHONUNBUFFERED=1
    {
        date -u +"start %FT%TZ"
        [ -f /tmp/hlcache/assets/minilm/.headlab-complete ] || { echo "NO ASSETS: call 1 did not run here"; exit 3; }
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$G"/whl/*.whl \
            || exit 4
        export PYTHONPATH=/tmp/site
        python3 -c "import papermill, nbclient, ipykernel, altair, vl_convert, bertviz, ipywidgets, anywidget, torch
print('torch', torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" || exit 5
        HEADLAB_COMMIT=$(cat "$G/commit") && export HEADLAB_COMMIT  # git may be missing there
        cd "$G/repo" || exit 6
        date -u +"book %FT%TZ"
        PY=python3 PRESETS=default SITE=0 LANES=${LANES:-4} OUT=/tmp/gpu-out setsid benchmarks/gpu_book.sh &
        book=$!
        (sleep "$LIMIT" > /dev/null 2>&1; echo "STOPPED after $LIMIT s"; kill -TERM -- "-$book") &
        watchdog=$!
        wait "$book"
        echo "gpu_book.sh exit $?"
        kill "$watchdog" 2> /dev/null
        date -u +"end %FT%TZ"
        tail -n 25 /tmp/gpu-out/book_presets.log
    } 2>&1 | tee "$OUT/log"
    cd "$root" || exit 6
    R=/tmp/gpu-out
    cp "$R/timings.txt" "$R/gpu.txt" "$R/runs/scorecard.csv" "$R/runs/timings.csv" "$R/runs/models.csv" "$OUT/"
    tar -C "$R" --exclude='*/masks' -cf - runs | xz -T0 -6 > "$OUT/runs.tar.xz"
    tar -C "$R" -cf - book_presets.log site/executed | xz -T0 -6 > "$OUT/executed.tar.xz"
    ls -la "$OUT"
    ;;
*)
    sed -n '2,16p' "$0"
    exit 2
    ;;
esac
