#!/usr/bin/env bash
# Build the llama-cpp-python wheel (version $LLAMACPP_VERSION, default 0.3.36; it compiles
# llama.cpp with -DGGML_NATIVE=ON) once into
# ${CSD_CACHE:-$HOME/.cache/csd}/wheels/llamacpp/<version>-<cpu>/ and reuse it when present;
# <cpu> is a hash of this CPU's instruction-set flags (a native build runs only on CPUs with
# the same flags). Prints the wheel's path; `pip install "$(this script)"` installs it.
set -euo pipefail
VERSION="${LLAMACPP_VERSION:-0.3.36}"
CACHE="${CSD_CACHE:-$HOME/.cache/csd}"
CPU="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-8 || echo generic)"
OUT="$CACHE/wheels/llamacpp/$VERSION-$CPU"
shopt -s nullglob
found=("$OUT"/llama_cpp_python-"$VERSION"-*.whl)
if (( ${#found[@]} )); then echo "${found[0]}"; exit 0; fi
SDIST="$("$(dirname "$0")/fetch_llamacpp_sdist.sh")"
mkdir -p "$OUT"
start=$(date +%s)
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" \
  python -m pip wheel -q --no-deps -w "$OUT" "$SDIST" >&2
seconds=$(( $(date +%s) - start ))
echo "$seconds" > "$OUT/build-seconds.txt"
echo "built llama-cpp-python $VERSION in $seconds s ($(nproc) cores)" >&2
found=("$OUT"/llama_cpp_python-"$VERSION"-*.whl)
echo "${found[0]}"
