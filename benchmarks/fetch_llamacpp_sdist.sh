#!/usr/bin/env bash
# Print the path of the llama-cpp-python sdist (version $LLAMACPP_VERSION, default
# 0.3.36), downloading it from PyPI into ${CSD_CACHE:-$HOME/.cache/csd}/sdist/ when
# it is neither there nor in $LLAMACPP_SDIST_DIR (default /tmp/lcp).
set -euo pipefail
VERSION="${LLAMACPP_VERSION:-0.3.36}"
NAME="llama_cpp_python-$VERSION.tar.gz"
CACHE="${CSD_CACHE:-$HOME/.cache/csd}"
for dir in "${LLAMACPP_SDIST_DIR:-/tmp/lcp}" "$CACHE/sdist"; do
  if [[ -f "$dir/$NAME" ]]; then echo "$dir/$NAME"; exit 0; fi
done
mkdir -p "$CACHE/sdist"
python -m pip download --no-binary :all: --no-deps \
  -d "$CACHE/sdist" "llama-cpp-python==$VERSION" >&2
echo "$CACHE/sdist/$NAME"
