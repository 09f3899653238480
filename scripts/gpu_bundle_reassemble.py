#!/usr/bin/env python3
"""Checks and unpacks the portable GPU bundle from its parts (docs/gpu.md,
"The portable GPU bundle"). Python 3.8+ standard library only: it runs on
the GPU host, which may have no xz or zstd program. scripts/gpu_bundle.py
copies it into every transfer-N/ folder as reassemble.py.

    python3 reassemble.py --parts DIR [--dest DIR]      check every part, unpack
    python3 reassemble.py --parts DIR --check           check the parts present

DIR (searched recursively) holds MANIFEST.json and the parts, as the
transfer-N/ folders or all in one folder. Every part's size and SHA-256 are
checked against MANIFEST.json, then each archive's SHA-256 while it is
unpacked, then every unpacked file's against the bundle's BUNDLE.json.
--check names the parts that are missing or damaged, and succeeds when
those present are sound (for checking each transfer as it arrives).
Unpacks into DEST/ortserve-gpu (DEST default: the current folder).
Exit status: 0 sound (and unpacked), 1 a part or file is damaged or missing.
"""
import argparse
import hashlib
import json
import sys
import tarfile
from pathlib import Path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Parts:
    """The parts of one archive read in order as one stream, hashed as read."""

    def __init__(self, paths):
        self.paths, self.index, self.current = list(paths), 0, None
        self.hash = hashlib.sha256()

    def read(self, size=-1):
        out = b""
        while size < 0 or len(out) < size:
            if self.current is None:
                if self.index >= len(self.paths):
                    break
                self.current = open(self.paths[self.index], "rb")
                self.index += 1
            chunk = self.current.read(-1 if size < 0 else size - len(out))
            if not chunk:
                self.current.close()
                self.current = None
                continue
            out += chunk
        self.hash.update(out)
        return out


def find_parts(parts_dir: Path, manifest: dict) -> tuple:
    """(file name -> path of the parts found, problems)."""
    found, problems = {}, []
    present = {p.name: p for p in parts_dir.rglob("*") if p.is_file()}
    for part in manifest["parts"]:
        path = present.get(part["file"])
        if path is None:
            problems.append(f"missing: {part['file']} (transfer {part['transfer']})")
        elif path.stat().st_size != part["size"]:
            problems.append(f"damaged: {part['file']} has {path.stat().st_size} bytes, the manifest says {part['size']}")
        elif file_sha256(path) != part["sha256"]:
            problems.append(f"damaged: {part['file']}: SHA-256 differs from the manifest")
        else:
            found[part["file"]] = path
    return found, problems


def safe_members(tar: tarfile.TarFile):
    for member in tar:
        name = Path(member.name)
        if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
            raise SystemExit(f"refusing archive member {member.name!r}")
        yield member


def unpack(manifest: dict, found: dict, dest: Path) -> list:
    problems = []
    for archive, meta in manifest["archives"].items():
        paths = [found[p["file"]] for p in manifest["parts"] if p["archive"] == archive]
        stream = Parts(paths)
        with tarfile.open(fileobj=stream, mode="r|xz") as tar:
            for member in safe_members(tar):
                if hasattr(tarfile, "data_filter"):  # Python 3.12 (and 3.8.17+ backports)
                    tar.extract(member, dest, filter="data")
                else:
                    tar.extract(member, dest)
        stream.read()  # the stream's tail after the archive's end, if any
        if stream.hash.hexdigest() != meta["sha256"]:
            problems.append(f"damaged: {archive}: SHA-256 of the joined parts differs from the manifest")
    root = dest / manifest["bundle"]
    files = json.loads((root / "BUNDLE.json").read_text())["files"]
    for rel, meta in files.items():
        path = root / rel
        if not path.is_file() or file_sha256(path) != meta["sha256"]:
            problems.append(f"damaged after unpacking: {rel}")
    for rel in ("run-gpu-checks.sh",):
        (root / rel).chmod(0o755)
    for program in (root / "bin").iterdir():
        program.chmod(0o755)
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default=str(Path(__file__).resolve().parent),
                    help="folder with MANIFEST.json and the parts (searched recursively)")
    ap.add_argument("--dest", default=".", help="unpack into DEST/<bundle>")
    ap.add_argument("--check", action="store_true", help="only check the parts present")
    args = ap.parse_args(argv)
    parts_dir = Path(args.parts)
    manifests = sorted(parts_dir.rglob("MANIFEST.json"))
    if not manifests:
        print(f"reassemble: no MANIFEST.json under {parts_dir}", file=sys.stderr)
        return 1
    manifest = json.loads(manifests[0].read_text())
    if any(json.loads(m.read_text()) != manifest for m in manifests[1:]):
        print(f"reassemble: the MANIFEST.json files under {parts_dir} differ (parts of two builds?)", file=sys.stderr)
        return 1
    found, problems = find_parts(parts_dir, manifest)
    print(f"reassemble: {manifest['bundle']} of {manifest['commit']}: {len(found)} of {len(manifest['parts'])} "
          f"parts sound")
    for p in problems:
        print(f"  {p}")
    if args.check:
        return 1 if any(p.startswith("damaged") for p in problems) else 0
    if problems:
        return 1
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    problems = unpack(manifest, found, dest)
    for p in problems:
        print(f"  {p}")
    if not problems:
        print(f"reassemble: unpacked and verified {dest / manifest['bundle']} (needs glibc >= "
              f"{manifest['glibc_needed']})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
