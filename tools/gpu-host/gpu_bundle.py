#!/usr/bin/env python3
"""A bundle of wheels for a GPU host with no network, in parts small enough to carry one per call.

    build    (where PyPI is reachable)  resolve the engine's and servebook's closure for the host's Python and
             platform, drop what the host has and what is never carried, download the rest (cached), write
             bundle.json and requirements.txt, pack one archive and split it into parts of --part-mib MiB:
                 python3 tools/gpu-host/gpu_bundle.py build --engine vllm==0.26.0 --host data/gpu-hosts/lent-h200.txt
    collect  (on the host, once per call)  copy the parts that arrived into one folder, checked, and say what
             is still missing:  python3 tools/gpu-host/gpu_bundle.py collect --from .bundle/parts --into /tmp/sb-parts
    install  (on the host; standard library and pip only)  check every part, join, check the whole, unpack and
             `pip install --no-index --no-deps --target`; a second call with the same bundle does nothing:
                 python3 tools/gpu-host/gpu_bundle.py install --parts /tmp/sb-parts --target /tmp/sb-site
    check    (anywhere)  what is in a parts folder and which parts are missing or damaged.
    size     (anywhere)  the part size `build` would use and why: the working tree that travels beside each part.

Each device call carries `.bundle/parts/parts.json` and one `.bundle/parts/part-NNN` (git-ignored) and runs
`collect`; the call after the last part runs `install`. A part, parts.json and the working tree must fit in 64 MiB:
`build` makes the parts as large as fit beside the tree as `git ls-files` lists it (tracked files, and untracked
ones that are not ignored: the carrier copies both), and says so, with a warning where they come out under 20 MiB.
`check` and `collect` exit 0 when every part is there, 3 while parts are still to come, 2 on a damaged part.
tools/gpu-host/README.md is the walk-through.

The host profile (data/gpu-hosts/*.txt) lists the host's packages, `name==version` where the version is known
and a bare `name` otherwise; `# python: X`, `# glibc: X` and `# machine: X` lines give the interpreter and
platform the wheels are chosen for. Nothing the host has is carried. Its packages of known version are given
to pip's resolver as installed, so the closure keeps them wherever they satisfy what is asked (and the
manifest says where they do not: through mistral_common>=1.11.5 and numba==0.65.0, vLLM 0.26.0 asks
numpy<2.4 and numpy<2.5 of a host with numpy 2.5.2, so the host's versions cannot be hard constraints;
--strict makes them so). Bare names are dropped with no
version constraint (the host's own version is used); bundle.json's host_requirements lists what the bundle
asks of every host package, and `install` checks it there.

Resolution is `pip install --dry-run --report --use-feature=fast-deps`: this index serves no separate
metadata files, and with fast-deps pip reads each wheel's METADATA by HTTP range requests, so neither vLLM
nor the CUDA wheels are downloaded to resolve. pip 23 downloads whole wheels even on --dry-run, so `build`
installs pip==26.3 into its cache once and uses that.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import fnmatch
import hashlib
import json
import lzma
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: what one call to the lent GPU host carries, the working tree included
CARRY_MIB = 64
#: room kept for the compile cache, files added before the call and the per-file overhead of the transfer (a tree
#: of 39.1 MiB beside a 24 MiB part was refused)
CARRY_MARGIN_MIB = 3.0
#: parts.json, which travels with every part: a few KiB for a bundle of tens of parts
PARTS_JSON_MIB = 0.05
#: parts under this make a bundle a long string of calls (vLLM 0.26.0's 253 MiB: 13 calls at 20 MiB): said aloud
SMALL_PART_MIB = 20
#: what vLLM 0.26.0's bundle weighed as built (xz-stored), to say how many calls a part size makes
VLLM_BUNDLE_MIB = 253


@dataclasses.dataclass
class Tree:
    """What a call carries besides the bundle: git's tracked files and the untracked ones it does not ignore (the
    carrier copies both), in bytes; `largest`: (folder two levels deep, or file), bytes, untracked), largest first."""

    tracked: int
    untracked: int
    files: tuple[int, int]
    largest: list[tuple[str, int, bool]]

    @property
    def mib(self) -> float:
        return (self.tracked + self.untracked) / MiB


def carried_tree(root: Path) -> Tree | None:
    """The working tree that travels with every call from the checkout at `root` (None: not a git checkout)."""
    def listed(*which: str) -> list[str]:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *which], capture_output=True, check=True)
        return [name.decode() for name in out.stdout.split(b"\0") if name]

    try:
        names = {False: listed("--cached"), True: listed("--others", "--exclude-standard")}
    except (OSError, subprocess.CalledProcessError):
        return None
    totals = {False: 0, True: 0}
    counts = {False: 0, True: 0}
    groups: dict[tuple[str, bool], int] = {}
    for untracked, found in names.items():
        for name in found:
            path = root / name
            if not path.is_file() or path.is_symlink():  # deleted since, or a link (which travels as one)
                continue
            size = path.stat().st_size
            totals[untracked] += size
            counts[untracked] += 1
            key = ("/".join(name.split("/")[:2]), untracked)
            groups[key] = groups.get(key, 0) + size
    largest = sorted(((name, size, untracked) for (name, untracked), size in groups.items()), key=lambda g: -g[1])
    return Tree(totals[False], totals[True], (counts[False], counts[True]), largest[:5])


def tracked_tree_mib(root: Path) -> float | None:
    """The size of the files a call carries besides the parts (git's tracked and untracked-not-ignored files)."""
    tree = carried_tree(root)
    return None if tree is None else tree.mib


def fitting_part_mib(tree: Tree | None) -> float:
    """The largest part, in whole MiB, that fits one call beside `tree` and parts.json (30 MiB for an unknown tree)."""
    if tree is None:
        return 30.0
    return max(4.0, float(int(CARRY_MIB - tree.mib - PARTS_JSON_MIB - CARRY_MARGIN_MIB)))


def default_part_mib(root: Path) -> float:
    """The largest part that fits one call beside the working tree (30 MiB when the tree's size is unknown)."""
    return fitting_part_mib(carried_tree(root))


def sizing(tree: Tree | None, part_mib: float, bundle_mib: float = VLLM_BUNDLE_MIB) -> tuple[list[str], list[str]]:
    """(what a call carries, warnings) for parts of `part_mib` beside `tree`: why the parts are their size, and what
    to do where they come out small or do not fit."""
    calls = -(-bundle_mib // part_mib)
    if tree is None:
        return ([f"parts of {part_mib:g} MiB (not a git checkout: the working tree's size is unknown); a bundle of "
                 f"{bundle_mib:g} MiB takes {calls:.0f} calls"], [])
    lines = [f"the working tree that travels with every call: {tree.mib:.1f} MiB (git ls-files: {tree.files[0]} "
             f"tracked files {tree.tracked / MiB:.1f} MiB; {tree.files[1]} untracked, not ignored, "
             f"{tree.untracked / MiB:.1f} MiB)",
             f"a call carries {CARRY_MIB} MiB: beside the tree, parts.json and {CARRY_MARGIN_MIB:g} MiB kept for the "
             f"transfer, parts of {part_mib:g} MiB (a bundle of {bundle_mib:g} MiB: {calls:.0f} calls)",
             "largest in the tree: " + ", ".join(f"{name} {size / MiB:.1f} MiB{' (untracked)' if untracked else ''}"
                                                 for name, size, untracked in tree.largest)]
    warnings = []
    room = CARRY_MIB - tree.mib - PARTS_JSON_MIB - CARRY_MARGIN_MIB
    if part_mib < fitting_part_mib(tree):
        lines.append(f"parts of {part_mib:g} MiB as asked (--part-mib); {fitting_part_mib(tree):g} MiB would fit")
        return lines, warnings
    if part_mib > room:
        warnings.append(f"parts of {part_mib:g} MiB do not fit one call beside a working tree of {tree.mib:.1f} MiB "
                        f"(at most {max(int(room), 0)} MiB): the carrier refuses them; leave --part-mib out")
    if part_mib < SMALL_PART_MIB:
        untracked = [f"{name} ({size / MiB:.1f} MiB)" for name, size, u in tree.largest if u]
        warnings.append(
            f"parts of {part_mib:g} MiB are small (under {SMALL_PART_MIB} MiB): the working tree that travels with "
            f"every call is {tree.mib:.1f} MiB of the call's {CARRY_MIB}, so a bundle of {bundle_mib:g} MiB takes "
            f"{calls:.0f} calls. To make room: "
            + (f"move the untracked files out of the checkout or git-ignore them ({', '.join(untracked)}); "
               if untracked else "")
            + "keep large files out of the tracked tree (the sample journals travel as one archive of 12 MiB, "
              "data/sample-journals.tar.xz), or build from a fresh clone; then build again without --part-mib")
    return lines, warnings


DEFAULT_CACHE = Path(os.environ.get("SERVEBOOK_CACHE", Path.home() / ".cache" / "servebook"))
ARCHIVE_STEM = "servebook-bundle"
PARTS_JSON = "parts.json"
MARKER = ".servebook-bundle.json"
PIP_PIN = "26.3"
MiB = 1 << 20

# Never carried, whatever needs them: (pattern on the normalized name, why).
EXCLUDE: list[tuple[str, str]] = [
    ("torch", "the host's own CUDA build is used"),
    ("torchvision", "the host's own build is used"),
    ("torchaudio", "the host's own build is used"),
    ("triton", "the host's own build (torch's) is used"),
    ("nvidia-*", "CUDA libraries: the host has torch's, and they are too large to carry"),
    ("cuda-*", "CUDA Python packages: the host has its own"),
    ("tilelang", "optional kernels, large; not needed for servebook's runs"),
    ("humming-kernels", "optional kernels with CUDA toolchain wheels; not needed for servebook's runs"),
    ("quack-kernels", "optional kernels; not needed for servebook's runs"),
    ("tokenspeed-*", "optional kernels; not needed for servebook's runs"),
    ("torchcodec", "video decoding; not needed for text serving"),
    ("pynvvideocodec", "video decoding; not needed for text serving"),
    ("opencv-*", "the host has opencv-python-headless"),
]

COMPRESSIONS = {"xz": ".tar.xz", "none": ".tar", "xz-stored": ".tar.xz"}


#: exit statuses of check and collect (gpu-host.sh receive): every part is here (0), a part is damaged or the parts
#: cannot be read (2), or what is here is sound and parts are still to come (3: not a failure, carry the next)
FAILED, WAITING = 2, 3
EXIT_STATUSES = ("exit status: 0 every part is here and sound (install may follow); 3 parts are still missing, those\n"
                 "here are sound (waiting, not a failure: carry the next); 2 a part is damaged, or no parts.json")


class BundleError(RuntimeError):
    """A bundle that is incomplete, damaged or cannot be made: the message says what to do."""


def log(msg: str) -> None:
    print(msg, flush=True)


def mib(n: int) -> str:
    return f"{n / MiB:,.1f} MiB"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * MiB):
            h.update(chunk)
    return h.hexdigest()


def normalize(name: str) -> str:
    """PEP 503: `Foo_Bar.baz` and `foo-bar-baz` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(filename: str) -> str:
    return normalize(filename.split("-", 1)[0])


# ---------------------------------------------------------------------------------------------------- host profile


@dataclasses.dataclass
class HostProfile:
    packages: dict[str, str | None]  # normalized name -> version, None where the version is not known
    python: str = "3.12"
    glibc: str = "2.28"
    machine: str = "x86_64"
    source: str = ""

    @property
    def pinned(self) -> dict[str, str]:
        return {n: v for n, v in self.packages.items() if v}

    def python_tag(self) -> str:
        major, minor = self.python.split(".")[:2]
        return f"cp{major}{minor}"

    def platforms(self) -> list[str]:
        """Every manylinux tag a glibc of this version runs, newest first (pip matches each tag exactly)."""
        major, minor = (int(x) for x in self.glibc.split(".")[:2])
        if major != 2:
            raise BundleError(f"glibc {self.glibc}: only 2.x is known")
        tags = [f"manylinux_2_{n}_{self.machine}" for n in range(minor, 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        tags += [f"{name}_{self.machine}" for n, name in legacy.items() if n <= minor]
        return tags

    def marker_env(self) -> dict[str, str]:
        major_minor = ".".join(self.python.split(".")[:2])
        full = self.python if self.python.count(".") >= 2 else self.python + ".0"
        return {
            "implementation_name": "cpython", "implementation_version": full, "os_name": "posix",
            "platform_machine": self.machine, "platform_release": "", "platform_system": "Linux",
            "platform_version": "", "python_full_version": full, "platform_python_implementation": "CPython",
            "python_version": major_minor, "sys_platform": "linux", "extra": "",
        }


_DIRECTIVE = re.compile(r"#\s*(python|glibc|machine)\s*:\s*([0-9A-Za-z._]+)")
_PACKAGE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*([A-Za-z0-9.+!_-]+))?")


def parse_host_profile(text: str, source: str = "") -> HostProfile:
    """`name==version` or `name` a line (so `pip freeze` output reads as it is); `#` starts a comment;
    `# python: 3.12.3`, `# glibc: 2.35` and `# machine: x86_64` set the target."""
    packages: dict[str, str | None] = {}
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if m := _DIRECTIVE.match(line):
            settings[m.group(1)] = m.group(2)
            continue
        line = line.split("#", 1)[0].split(" @ ", 1)[0].strip()  # `pip freeze`'s `name @ file:///...`: no version
        if not line:
            continue
        m = _PACKAGE.fullmatch(line)
        if not m:
            raise BundleError(f"{source or 'host profile'}:{number}: not `name` or `name==version`: {raw!r}")
        name = normalize(m.group(1))
        if name in packages:
            raise BundleError(f"{source or 'host profile'}:{number}: {name} is listed twice")
        packages[name] = m.group(2)
    return HostProfile(packages=packages, source=source, **settings)


def load_host_profile(path: Path) -> HostProfile:
    return parse_host_profile(path.read_text(), source=str(path))


# ---------------------------------------------------------------------------------------------------- drop rules


def drop_reason(name: str, host: HostProfile, exclude: list[tuple[str, str]] = EXCLUDE,
                carry: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """Why `name` is not carried, as (kind, words), or None when it goes into the bundle.

    kind is "host-pinned" (the host has this version), "host-unpinned" (the host has it, version not listed:
    its own is used, unconstrained) or "excluded" (never carried, and the host does not list it). A name in
    `carry` (build --carry) goes into the bundle whatever the host has."""
    n = normalize(name)
    if n in carry:
        return None
    if n in host.packages:
        version = host.packages[n]
        if version:
            return "host-pinned", f"the host has {n}=={version}"
        return "host-unpinned", f"the host has {n} (version not listed: the host's own is used, unconstrained)"
    for pattern, why in exclude:
        if fnmatch.fnmatchcase(n, pattern):
            return "excluded", f"excluded by {pattern!r}: {why}; not on the host"
    return None


def _packaging():
    """packaging's Requirement, SpecifierSet and Version: pip's vendored copy, or the package itself."""
    try:
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.specifiers import SpecifierSet
        from pip._vendor.packaging.version import Version
    except ImportError:  # pragma: no cover - pip without its vendored packaging
        from packaging.requirements import Requirement
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version
    return Requirement, SpecifierSet, Version


def applies(req, env: dict[str, str], extras: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether requirement `req` holds for the host, given the extras its parent was asked with."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate(dict(env, extra=e)) for e in {"", *extras})


@dataclasses.dataclass
class Closure:
    kept: dict[str, set[str]]  # name -> extras asked of it
    required_by: dict[str, set[str]]  # kept name -> who asked
    dropped: dict[str, dict]  # name -> {kind, reason, required_by: {parent: specifier}}


def walk_closure(roots: list[tuple[str, str]], items: dict[str, dict], host: HostProfile,
                 exclude: list[tuple[str, str]] = EXCLUDE, carry: frozenset[str] = frozenset()) -> Closure:
    """What the roots need on the host: follow requires_dist from each (parent, requirement) root through the
    resolved `items` (name -> {"requires_dist": [...]}), never into a dropped package, so what only a dropped
    package needs (torch's sympy, tilelang's deps) stays out."""
    Requirement, _, _ = _packaging()
    env = host.marker_env()
    closure = Closure(kept={}, required_by={}, dropped={})
    queue = [(parent, Requirement(text), frozenset()) for parent, text in roots]
    while queue:
        parent, req, parent_extras = queue.pop()
        if not applies(req, env, parent_extras):
            continue
        name = normalize(req.name)
        reason = drop_reason(name, host, exclude, carry)
        if reason:
            entry = closure.dropped.setdefault(name, {"kind": reason[0], "reason": reason[1], "required_by": {}})
            entry["required_by"][parent] = str(req.specifier) or "any"
            continue
        closure.required_by.setdefault(name, set()).add(parent)
        extras = set(req.extras)
        if name in closure.kept and extras <= closure.kept[name]:
            continue
        closure.kept.setdefault(name, set()).update(extras)
        if name not in items:
            raise BundleError(f"the resolver did not return {name} (needed by {parent})")
        for text in items[name].get("requires_dist") or []:
            queue.append((name, Requirement(text), frozenset(closure.kept[name])))
    return closure


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A requirement of `asker` that the host's listed version of `name` does not meet."""

    asker: str
    name: str
    specifier: str
    host_version: str

    def words(self) -> str:
        return f"{self.asker} asks {self.name}{self.specifier}, the host has {self.host_version}"


#: what the host's own compiled packages are built against: never carried over the host's (a bundle that carried
#: numpy 2.3.5 for a numba pin would have put it under the host's torch, scipy and pandas)
HOST_FOUNDATION = ("numpy", "torch", "torchvision", "torchaudio", "triton", "nvidia-*", "cuda-*")


def refused_host_versions(items: dict[str, dict], askers: set[str] | frozenset[str], host: HostProfile,
                          exact_only: bool = False) -> dict[str, Refusal]:
    """Host packages whose listed version a requirement of `askers` (names in `items`) refuses.

    With `exact_only`, only exact pins count (an engine's `transformers==5.12.1` against the host's 5.17: SGLang
    0.5.17 then failed at import, as the host's newer transformers registers a model name SGLang registers again)."""
    Requirement, _, Version = _packaging()
    env = host.marker_env()
    out: dict[str, Refusal] = {}
    for asker in sorted(askers):
        for text in (items.get(asker) or {}).get("requires_dist") or []:
            req = Requirement(text)
            name = normalize(req.name)
            have = host.pinned.get(name)
            if have is None or not applies(req, env) or not str(req.specifier):
                continue
            if exact_only and not all(spec.operator in ("==", "===") for spec in req.specifier):
                continue
            if not req.specifier.contains(Version(have), prereleases=True):
                out.setdefault(name, Refusal(asker, name, str(req.specifier), have))
    return out


def settle_auto_carry(pinned: dict[str, Refusal], items: dict[str, dict], host: HostProfile,
                      chosen: frozenset[str] = frozenset()) -> tuple[dict[str, Refusal], dict[str, Refusal]]:
    """(carried, kept the host's): the engines' exact pins the host has in another version (`pinned`), with what each
    carried package refuses of the host's in turn (transformers 5.12.1's tokenizers<=0.23.0), to a fixed point; then
    without what would move the host's foundation (HOST_FOUNDATION), the packages that asked for it and what they
    brought (SGLang's numba==0.65.1 asks numpy<2.5: the host's numba 0.68 is kept; SGLang ran with it).
    `chosen`: what build --carry names, carried whatever it asks."""
    carried = dict(pinned)
    while True:
        more = {n: r for n, r in refused_host_versions(items, (set(carried) | chosen) & set(items), host).items()
                if n not in carried and n not in chosen and n in items}
        if not more:
            break
        carried.update(more)
    kept: dict[str, Refusal] = {}
    blocked = {n for n in carried if any(fnmatch.fnmatchcase(n, p) for p in HOST_FOUNDATION)}
    while blocked:
        for name in blocked:
            kept[name] = carried.pop(name)
        # whoever asked for a blocked package is not carried either, nor what only it asked for
        blocked = {kept[n].asker for n in list(kept) if kept[n].asker in carried}
        blocked |= {n for n, r in carried.items() if r.asker in kept}
    return carried, kept


def host_requirements(dropped: dict[str, dict], host: HostProfile) -> list[dict]:
    """What the bundle asks of the host's own packages, and whether the listed version meets it."""
    _, SpecifierSet, Version = _packaging()
    rows = []
    for name, entry in sorted(dropped.items()):
        if not entry["kind"].startswith("host"):
            continue
        have = host.packages.get(name)
        for parent, spec in sorted(entry["required_by"].items()):
            if spec == "any":
                status = "ok"
            elif have is None:
                status = "unknown"
            else:
                status = "ok" if SpecifierSet(spec).contains(Version(have), prereleases=True) else "conflict"
            rows.append({"name": name, "specifier": spec, "required_by": parent, "host_version": have,
                         "status": status})
    return rows


# ---------------------------------------------------------------------------------------------------- parts


def split_file(src: Path, out_dir: Path, part_bytes: int, prefix: str = "part-") -> list[dict]:
    """Cut `src` into out_dir/part-000, part-001, ... of at most part_bytes each; old parts there go first."""
    if part_bytes <= 0:
        raise BundleError("the part size must be positive")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(prefix + "*"):
        old.unlink()
    parts = []
    with open(src, "rb") as f:
        while True:
            name = f"{prefix}{len(parts):03d}"
            h, size = hashlib.sha256(), 0
            with open(out_dir / name, "wb") as out:
                while size < part_bytes and (chunk := f.read(min(4 * MiB, part_bytes - size))):
                    out.write(chunk)
                    h.update(chunk)
                    size += len(chunk)
            if size == 0 and parts:
                (out_dir / name).unlink()
                break
            parts.append({"name": name, "size": size, "sha256": h.hexdigest()})
            if size < part_bytes:
                break
    return parts


def find_part(dirs: list[Path], name: str) -> Path | None:
    for d in dirs:
        if (d / name).is_file():
            return d / name
    return None


def load_parts_manifest(dirs: list[Path]) -> tuple[dict, Path]:
    path = find_part(dirs, PARTS_JSON)
    if path is None:
        raise BundleError(f"no {PARTS_JSON} in {', '.join(map(str, dirs))}: carry it with the first part")
    return json.loads(path.read_text()), path


def part_status(dirs: list[Path], manifest: dict, verify: bool = True) -> list[dict]:
    """Each part with its state: ok, missing, size (wrong size) or sha256 (damaged)."""
    rows = []
    for part in manifest["parts"]:
        path = find_part(dirs, part["name"])
        if path is None:
            state = "missing"
        elif path.stat().st_size != part["size"]:
            state = "size"
        elif verify and sha256_file(path) != part["sha256"]:
            state = "sha256"
        else:
            state = "ok"
        rows.append({**part, "path": str(path) if path else None, "state": state})
    return rows


def join_parts(dirs: list[Path], manifest: dict, out: Path) -> str:
    """Join the parts into `out`, checking each part's and the whole's sha256; returns the whole's."""
    whole = hashlib.sha256()
    with open(out, "wb") as f:
        for part in manifest["parts"]:
            path = find_part(dirs, part["name"])
            if path is None:
                raise BundleError(f"{part['name']} is missing")
            h = hashlib.sha256()
            with open(path, "rb") as src:
                while chunk := src.read(4 * MiB):
                    h.update(chunk)
                    whole.update(chunk)
                    f.write(chunk)
            if h.hexdigest() != part["sha256"]:
                raise BundleError(f"{path}: sha256 {h.hexdigest()[:12]} is not {part['sha256'][:12]}: carry it again")
    digest = whole.hexdigest()
    if digest != manifest["archive"]["sha256"]:
        raise BundleError(f"the joined archive's sha256 {digest[:12]} is not {manifest['archive']['sha256'][:12]}")
    return digest


# ---------------------------------------------------------------------------------------------------- archive


def _tarinfo(tar: tarfile.TarFile, path: Path, arcname: str) -> tarfile.TarInfo:
    info = tar.gettarinfo(str(path), arcname)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_tar(files: list[tuple[Path, str]], fileobj) -> None:
    with tarfile.open(fileobj=fileobj, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path, arcname in files:
            with open(path, "rb") as f:
                tar.addfile(_tarinfo(tar, path, arcname), f)


def pack_archive(files: list[tuple[Path, str]], out: Path, compression: str, preset: int = 6) -> str:
    """One archive of `files`; xz through the `xz -T0` binary when there is one, else Python's lzma."""
    if compression == "none":
        with open(out, "wb") as f:
            write_tar(files, f)
        return "tar"
    xz = shutil.which("xz")
    if xz:
        with open(out, "wb") as f:
            proc = subprocess.Popen([xz, f"-{preset}", "-T0", "-c"], stdin=subprocess.PIPE, stdout=f)
            assert proc.stdin is not None
            write_tar(files, proc.stdin)
            proc.stdin.close()
            if proc.wait() != 0:
                raise BundleError(f"xz failed with {proc.returncode}")
        return f"tar | xz -{preset} -T0"
    with lzma.open(out, "wb", preset=preset) as f:
        write_tar(files, f)
    return f"tar + lzma preset {preset}"


def _safe_extract(tar: tarfile.TarFile, dest: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    for member in tar:  # pragma: no cover - Pythons before 3.11.4
        target = (dest / member.name).resolve()
        if not str(target).startswith(str(dest.resolve())) or not (member.isfile() or member.isdir()):
            raise BundleError(f"unsafe member in the archive: {member.name}")
        tar.extract(member, dest)


def unpack_archive(archive: Path, dest: Path, compression: str) -> str:
    dest.mkdir(parents=True, exist_ok=True)
    xz = shutil.which("xz")
    if compression == "none":
        with tarfile.open(archive, "r:") as tar:
            _safe_extract(tar, dest)
        return "tar"
    if xz:
        proc = subprocess.Popen([xz, "-dc", "-T0", str(archive)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            _safe_extract(tar, dest)
        if proc.wait() != 0:
            raise BundleError(f"xz -d failed with {proc.returncode}")
        return "xz -dc -T0"
    with tarfile.open(archive, "r:xz") as tar:
        _safe_extract(tar, dest)
    return "lzma"


def stored_copy(src: Path, dst: Path) -> None:
    """The same wheel with its members stored, not deflated, so that xz sees (and squeezes) the raw bytes.
    pip installs it like the original: RECORD hashes the members' contents, not the zip."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED, allowZip64=True) as zout:
        for info in zin.infolist():
            new = zipfile.ZipInfo(info.filename, info.date_time)
            new.external_attr, new.create_system, new.compress_type = info.external_attr, info.create_system, 0
            with zin.open(info) as fin, zout.open(new, "w", force_zip64=info.file_size > 0x7FFF0000) as fout:
                shutil.copyfileobj(fin, fout, 4 * MiB)


# ---------------------------------------------------------------------------------------------------- build


class Pip:
    """pip==PIP_PIN, installed once into the cache by the running pip, for every step of `build`.

    Resolution runs it as `python -S` with only pip and the host stubs on sys.path: the stubs are the host's
    packages of known version, seen as installed, so pip keeps them wherever they satisfy what is asked and
    says (by planning another version) where they do not, instead of failing as constraints would."""

    def __init__(self, cache: Path):
        found = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
        self.running = (found.stdout.split() or ["?", "?"])[1]
        self.home = cache / f"pip-{PIP_PIN}"
        if not (self.home / "pip").is_dir():
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--target", str(self.home), f"pip=={PIP_PIN}"], check=True)
        self.version = PIP_PIN

    def run(self, *args: str, cwd: Path | None = None, stubs: Path | None = None) -> subprocess.CompletedProcess:
        path = [str(self.home)] + ([str(stubs)] if stubs else [os.environ.get("PYTHONPATH", "")])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
        cmd = [sys.executable, *(["-S"] if stubs else []), "-m", "pip", "--disable-pip-version-check", *args]
        proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "is ignored: it is neither" not in ln]
            raise BundleError(f"pip {' '.join(args[:2])} failed ({proc.returncode}):\n" + "\n".join(lines[-40:]))
        return proc


def write_host_stubs(host: HostProfile, where: Path, carry: frozenset[str] = frozenset()) -> Path:
    """A dist-info with only a name and a version for each host package of known version (but those carried)."""
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    for name, version in sorted(host.pinned.items()):
        if name in carry:
            continue
        info = where / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("gpu_bundle host stub\n")
    return where


def target_options(host: HostProfile) -> list[str]:
    opts = ["--only-binary=:all:", "--python-version", host.python, "--implementation", "cp",
            "--abi", host.python_tag(), "--abi", "abi3", "--abi", "none"]
    for tag in host.platforms():
        opts += ["--platform", tag]
    return opts


def report_items(report: dict) -> dict[str, dict]:
    items = {}
    for entry in report["install"]:
        meta, info = entry["metadata"], entry["download_info"]
        hashes = info.get("archive_info", {}).get("hashes", {})
        sha = hashes.get("sha256") or info.get("archive_info", {}).get("hash", "sha256=").split("=", 1)[1]
        items[normalize(meta["name"])] = {
            "name": meta["name"], "version": meta["version"], "requires_dist": meta.get("requires_dist") or [],
            "url": info["url"], "filename": info["url"].rsplit("/", 1)[1].split("#")[0], "sha256": sha or None,
        }
    return items


def resolve(pip: Pip, host: HostProfile, reqs: list[str], work: Path, tag: str, stubs: Path, no_deps: bool = False,
            constraints: Path | None = None) -> dict[str, dict]:
    """pip's dry-run resolution of `reqs` for the host's tags, the host's packages seen as installed; name -> item
    for what pip would install (a host package appears only where something asks for another version)."""
    if not reqs:
        return {}
    req_file, report = work / f"{tag}-requirements.txt", work / f"{tag}-report.json"
    req_file.write_text("".join(r + "\n" for r in reqs))
    args = ["install", "--dry-run", "--use-feature=fast-deps", "--quiet",
            "--report", str(report), *target_options(host), "-r", str(req_file)]
    if no_deps:
        args.append("--no-deps")
    if constraints:
        args += ["-c", str(constraints)]
    pip.run(*args, stubs=stubs)
    return report_items(json.loads(report.read_text()))


def servebook_requirements(repo: Path, extras: list[str] | tuple[str, ...] = ()) -> list[str]:
    """servebook's own requirements, and those of the optional groups asked for (`--extra router`: the router
    that launch.replicas starts in front of the replicas)."""
    import tomllib

    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    groups = project.get("optional-dependencies", {})
    unknown = sorted(set(extras) - set(groups))
    if unknown:
        raise SystemExit(f"--extra {', '.join(unknown)}: servebook has no such extra ({', '.join(sorted(groups))})")
    return list(project["dependencies"]) + [r for e in extras for r in groups[e]]


def git_state(repo: Path) -> dict:
    def git(*args):
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def build_servebook_wheel(pip: Pip, repo: Path, work: Path) -> Path:
    """servebook's wheel, built from a copy of pyproject.toml, README.md and lib/ (the working tree as it is),
    so that setuptools leaves no build/ or egg-info in the repo (build/ would travel with every device call)."""
    src, out = work / "servebook-src", work / "servebook-wheel"
    for d in (src, out):
        shutil.rmtree(d, ignore_errors=True)
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(repo / name, src / name)
    shutil.copytree(repo / "lib", src / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    pip.run("wheel", "--no-deps", "--quiet", str(src), "-w", str(out), cwd=src)
    wheels = list(out.glob("servebook-*.whl"))
    if len(wheels) != 1:
        raise BundleError(f"pip wheel made {[w.name for w in wheels]}")
    return wheels[0]


def direct_roots(engines: dict[str, dict], servebook_reqs: list[str], host: HostProfile,
                 exclude: list[tuple[str, str]] = EXCLUDE, carry: frozenset[str] = frozenset()) -> dict[str, list]:
    """The resolution's roots: the engines' and servebook's own requirements that hold on the host and are
    not dropped (a dropped one's pin, e.g. vLLM's numba==0.65.0 needing numpy<2.5, would fail the resolution
    against the host's numpy for a package that is never carried)."""
    Requirement, _, _ = _packaging()
    env = host.marker_env()
    groups: dict[str, list] = {}
    sources = {name: item["requires_dist"] for name, item in engines.items()}
    sources["servebook"] = servebook_reqs
    for parent, reqs in sources.items():
        for text in reqs:
            req = Requirement(text)
            if applies(req, env) and not drop_reason(req.name, host, exclude, carry):
                req.marker = None
                groups.setdefault(parent, []).append(str(req))
    return groups


def fetch(pip: Pip, host: HostProfile, items: list[dict], cache: Path) -> tuple[list[Path], list[dict]]:
    """Each item's wheel in the cache, checked against its sha256; only the missing ones are downloaded."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = []
    for item in items:
        path = cache / item["filename"]
        if not (path.is_file() and (item["sha256"] is None or sha256_file(path) == item["sha256"])):
            missing.append(item)
    if missing:
        urls = [f"{i['url'].split('#')[0]}#sha256={i['sha256']}" if i["sha256"] else i["url"] for i in missing]
        pip.run("download", "--no-deps", "--quiet", "-d", str(cache), *target_options(host), *urls)
    paths = []
    for item in items:
        path = cache / item["filename"]
        if not path.is_file():
            raise BundleError(f"pip download did not leave {path}")
        digest = sha256_file(path)
        if item["sha256"] and digest != item["sha256"]:
            path.unlink()
            raise BundleError(f"{path.name}: sha256 {digest[:12]} is not the index's {item['sha256'][:12]}")
        item["sha256"] = digest
        item["size"] = path.stat().st_size
        paths.append(path)
    return paths, missing


def walk_groups(engines: dict[str, dict], sb_reqs: list[str], items: dict[str, dict], host: HostProfile,
                exclude: list[tuple[str, str]], carry: frozenset[str]):
    """The closure walked from each engine and from servebook: (by group, kept names, dropped, unreached)."""
    groups = {name: [("--engine", f"{name}=={item['version']}")] for name, item in engines.items()}
    groups["servebook"] = [("servebook", r) for r in sb_reqs]
    by_group = {g: walk_closure(r, items, host, exclude, carry) for g, r in groups.items()}
    kept = sorted(set().union(*(c.kept for c in by_group.values())))
    dropped: dict[str, dict] = {}
    for c in by_group.values():
        for name, entry in c.dropped.items():
            merged = dropped.setdefault(name, {**entry, "required_by": {}})
            merged["required_by"].update(entry["required_by"])
    for name, entry in dropped.items():
        if name in items:
            entry["resolved_version"] = items[name]["version"]
            have = host.packages.get(name)
            if have and have != items[name]["version"]:
                entry["note"] = f"the closure asks for {items[name]['version']}; the host's {have} is used"
    unreached = sorted(f"{i['name']}=={i['version']}" for n, i in items.items() if n not in kept and n not in dropped)
    return by_group, kept, dropped, unreached


def newest_platform(filenames: list[str]) -> tuple[tuple[int, int], list[str]]:
    """The newest glibc a set of wheels needs, from their manylinux tags, and which wheels need it."""
    need: dict[str, tuple[int, int]] = {}
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    for name in filenames:
        platforms = name[:-4].split("-")[-1].split(".")
        found = [(int(m.group(1)), int(m.group(2))) for t in platforms if (m := re.match(r"manylinux_(\d+)_(\d+)_", t))]
        found += [v for t in platforms for k, v in legacy.items() if t.startswith(k + "_")]
        if found:
            need[name] = min(found)  # a wheel tagged for several runs on the oldest
    if not need:
        return (0, 0), []
    top = max(need.values())
    return top, sorted(n for n, v in need.items() if v == top)


#: engines that the GPU host builds from a source distribution (servebook compiles llama.cpp's server for the GPU
#: there): the bundle carries the sdist instead of wheels
SOURCE_ENGINES = {"llamacpp": "llama-cpp-python"}


def _source_pins(engines: list[str]) -> list[str]:
    """`llamacpp==0.3.36` as the source distribution to carry (llama-cpp-python==0.3.36, which vendors llama.cpp)."""
    out = []
    for engine in engines:
        name, _, version = engine.partition("==")
        if normalize(name) in SOURCE_ENGINES:
            if not version:
                raise BundleError(f"--engine {engine}: pin a version, e.g. llamacpp==0.3.36")
            out.append(f"{SOURCE_ENGINES[normalize(name)]}=={version}")
    return out


def fetch_sources(pip: "Pip", pins: list[str], cache: Path) -> list[Path]:
    """Each pinned source distribution, downloaded once into the cache."""
    cache.mkdir(parents=True, exist_ok=True)
    paths = []
    for pin in pins:
        name, version = pin.split("==")
        stem = f"{name.replace('-', '_')}-{version}"
        found = sorted(cache.glob(f"{stem}.tar.gz"))
        if not found:
            pip.run("download", "--no-deps", "--no-binary", ":all:", "--quiet", "-d", str(cache), pin)
            found = sorted(cache.glob(f"{stem}.tar.gz"))
        if not found:
            raise BundleError(f"pip download left no {stem}.tar.gz in {cache}")
        paths.append(found[0])
    return paths


def _engine_pins(engines: list[str]) -> list[str]:
    pins = [e for e in engines if e.lower() != "none" and normalize(e.partition("==")[0]) not in SOURCE_ENGINES]
    for pin in pins:
        if "==" not in pin:
            raise BundleError(f"--engine {pin}: pin a version (e.g. vllm==0.26.0), or say none")
    return pins


def _group_of(name: str, by_group: dict[str, Closure]) -> str:
    return "+".join(g for g, c in by_group.items() if name in c.kept) or "?"


def _manifest(host, pip, state, pins, wheels, dropped, unreached, sb_wheel, strict, carry) -> dict:
    rows = host_requirements(dropped, host)
    return {
        "format": 1,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "engines": pins,
        "servebook": {**state, "wheel": sb_wheel.name},
        "host_profile": {"path": host.source, "sha256": sha256_file(Path(host.source)), "python": host.python,
                         "glibc": host.glibc, "machine": host.machine, "packages": host.packages},
        "target": {"python_version": host.python, "implementation": "cp",
                   "abis": [host.python_tag(), "abi3", "none"], "platforms": host.platforms()},
        "resolver": {"pip": pip.version, "strict": strict, "carried_although_on_host": sorted(carry),
                     "how": "pip install --dry-run --use-feature=fast-deps --report for the target's tags, in a "
                            "python -S whose only installed packages are stubs of the host's packages of known "
                            "version (kept where they satisfy; --strict makes them constraints instead); roots: "
                            "the engines' and servebook's requirements that are not dropped; then a walk of "
                            "requires_dist from the engines and servebook that never enters a dropped package"},
        "wheels": wheels,
        "dropped": [{"name": n, **{k: (dict(sorted(v.items())) if k == "required_by" else v) for k, v in e.items()}}
                    for n, e in sorted(dropped.items())],
        "resolved_but_unneeded": unreached,
        "host_requirements": rows,
        "notes": [
            "Bare names in the host profile are dropped with no version constraint: the host's own version is "
            "used. host_requirements says what the bundle's packages ask of each; status 'unknown' is checked by "
            "`install` on the host, and 'conflict' means the host's listed version does not meet it.",
            "Dropped packages of kind 'excluded' are not on the host: code paths that import them fail there.",
        ],
    }


def build(args) -> int:
    t0 = time.monotonic()
    out, cache = Path(args.out).resolve(), Path(args.cache).expanduser().resolve()
    work, parts_dir = out / "work", out / "parts"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    host = load_host_profile(Path(args.host))
    pins = _engine_pins(args.engine)
    exclude = EXCLUDE + [(normalize(p), "excluded with --exclude") for p in args.exclude]
    carry = frozenset(normalize(n) for n in args.carry)
    pip = Pip(cache)
    log(f"[1/8] pip {pip.version} from {pip.home} (the running pip is {pip.running}); host {host.source}: "
        f"{len(host.packages)} packages "
        f"({len(host.pinned)} with versions), Python {host.python}, glibc {host.glibc}, {host.machine}")

    state = git_state(REPO)
    sb_wheel = build_servebook_wheel(pip, REPO, work)
    log(f"[2/8] servebook wheel {sb_wheel.name} ({sb_wheel.stat().st_size / 1024:,.0f} KiB) at "
        f"{(state['commit'] or '?')[:12]}{' (uncommitted changes)' if state['dirty'] else ''}")

    engines = resolve(pip, host, pins, work, "engines", write_host_stubs(host, work / "no-stubs", carry),
                      no_deps=True) if pins else {}
    # an engine's exact pin on a package the host has in another version: the engine's is carried (it goes first
    # on PYTHONPATH), or the engine would run on a version it never ran with
    chosen = carry
    pinned = {} if args.no_auto_carry else refused_host_versions(engines, set(engines), host, exact_only=True)
    carry |= frozenset(pinned)
    stubs = write_host_stubs(host, work / "host-stubs", carry)
    sb_reqs = servebook_requirements(REPO, args.extra)
    roots = direct_roots(engines, sb_reqs, host, exclude, carry)
    n_roots = sum(map(len, roots.values()))
    log(f"[3/8] roots: {', '.join(pins) or 'no engine'} + servebook: {n_roots} requirements the host lacks "
        f"({', '.join(f'{g} {len(r)}' for g, r in roots.items())})")

    constraints = None
    if args.strict:
        constraints = work / "constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(host.pinned.items())))
    t = time.monotonic()
    resolved = resolve(pip, host, sorted({r for rs in roots.values() for r in rs}), work, "closure", stubs,
                       constraints=constraints)
    moved = sorted(f"{n} {resolved[n]['version']} (host {v})" for n, v in host.pinned.items() if n in resolved)
    log(f"[4/8] resolved {len(resolved)} packages to install beside the host's {len(host.pinned)} of known "
        f"version{' (constraints: --strict)' if args.strict else ''} in {time.monotonic() - t:.0f} s; "
        f"host versions something asks to change: {', '.join(moved) or 'none'}")

    items = {**resolved, **engines}
    auto_carried, host_kept = settle_auto_carry(pinned, items, host, chosen) if pinned else ({}, {})
    carry = chosen | frozenset(auto_carried)
    for name, refusal in sorted(auto_carried.items()):
        log(f"      carried although the host has it: {name} ({refusal.words()})")
    for name, refusal in sorted(host_kept.items()):
        log(f"      the host's own kept: {name} ({refusal.words()}), as carrying it would move the host's numpy, "
            "torch or CUDA packages")
    by_group, kept, dropped, unreached = walk_groups(engines, sb_reqs, items, host, exclude, carry)
    kinds = {k: sum(e["kind"] == k for e in dropped.values()) for k in ("host-pinned", "host-unpinned", "excluded")}
    log(f"[5/8] bundle: {len(kept)} wheels + servebook; dropped {len(dropped)} "
        f"({', '.join(f'{k} {v}' for k, v in kinds.items())}), {len(unreached)} needed only by dropped packages")
    absent = [f"{n} ({', '.join(sorted(e['required_by']))})" for n, e in sorted(dropped.items()) if e["kind"] == "excluded"]
    log(f"      not carried and not on the host: {'; '.join(absent) or 'none'}")

    t = time.monotonic()
    chosen = [items[n] for n in kept]
    paths, fetched = fetch(pip, host, chosen, cache / "wheels")
    total = sum(i["size"] for i in chosen)
    top, needers = newest_platform([i["filename"] for i in chosen])
    log(f"[6/8] wheels: {len(chosen)} in {cache / 'wheels'}, {len(fetched)} downloaded "
        f"({mib(sum(i['size'] for i in fetched))}), {mib(total)} in all ({time.monotonic() - t:.0f} s); "
        f"newest glibc asked: {top[0]}.{top[1]} ({', '.join(needers[:4]) or 'none'})")

    wheels = [{"name": i["name"], "version": i["version"], "filename": i["filename"], "size": i["size"],
               "sha256": i["sha256"], "url": i["url"], "for": _group_of(normalize(i["name"]), by_group),
               "required_by": sorted(set().union(*(c.required_by.get(normalize(i["name"]), set())
                                                   for c in by_group.values())))} for i in chosen]
    wheels.append({"name": "servebook", "version": sb_wheel.name.split("-")[1], "filename": sb_wheel.name,
                   "size": sb_wheel.stat().st_size, "sha256": sha256_file(sb_wheel), "url": None,
                   "for": "servebook", "required_by": []})
    manifest = _manifest(host, pip, state, pins, wheels, dropped, unreached, sb_wheel, args.strict, carry)
    manifest["resolver"]["carried_because"] = {n: r.words() for n, r in sorted(auto_carried.items())}
    manifest["resolver"]["host_kept_although_asked"] = {n: r.words() for n, r in sorted(host_kept.items())}
    manifest["target"]["newest_glibc_needed"] = {"glibc": f"{top[0]}.{top[1]}", "by": needers}
    sources = fetch_sources(pip, _source_pins(args.engine), cache / "sources")
    manifest["sources"] = [{"filename": p.name, "size": p.stat().st_size, "sha256": sha256_file(p)} for p in sources]
    manifest["engines"] += [e for e in args.engine if normalize(e.partition("==")[0]) in SOURCE_ENGINES]
    if sources:
        log(f"      sources: {', '.join(f'{p.name} ({mib(p.stat().st_size)})' for p in sources)}, built on the host")
    write_outputs(args, out, work, parts_dir, manifest, paths + [sb_wheel], t0, sources)
    return 0


def summarize(manifest: dict) -> dict:
    """Wheels and bytes by what needs them: the engine wheels, servebook's, and each group's dependencies."""
    engines = {normalize(e.split("==")[0]) for e in manifest["engines"]}
    sizes: dict[str, list[int]] = {}
    for w in manifest["wheels"]:
        name = normalize(w["name"])
        group = ("engine wheels" if name in engines else "servebook wheel" if name == "servebook"
                 else f"needed by {w['for']}")
        sizes.setdefault(group, []).append(w["size"])
    return {g: {"wheels": len(s), "bytes": sum(s)} for g, s in sorted(sizes.items())}


def write_outputs(args, out: Path, work: Path, parts_dir: Path, manifest: dict, wheel_paths: list[Path],
                  t0: float, sources: list[Path] | None = None) -> None:
    names = [wheel_name(p.name) for p in wheel_paths]
    if len(set(names)) != len(names):
        raise BundleError(f"two versions of one package: {sorted(n for n in names if names.count(n) > 1)}")
    stage = work / "stage"
    stage.mkdir()
    if args.compress == "xz-stored":
        (stage / "wheels").mkdir()
        for p in wheel_paths:
            stored_copy(p, stage / "wheels" / p.name)
        wheel_paths = sorted((stage / "wheels").iterdir())
        for w in manifest["wheels"]:
            w["stored_sha256"] = sha256_file(stage / "wheels" / w["filename"])
    manifest["totals"] = summarize(manifest)
    manifest["compression"] = args.compress
    text = json.dumps(manifest, indent=1, sort_keys=False) + "\n"
    reqs = (f"# {len(manifest['wheels'])} wheels for {', '.join(manifest['engines']) or 'servebook alone'}; the hashes are "
            "of the wheels as published (bundle.json's stored_sha256: as re-zipped in the archive)\n")
    reqs += "".join(f"{w['name']}=={w['version']} --hash=sha256:{w['sha256']}\n" for w in manifest["wheels"])
    for d in (stage, out):
        (d / "bundle.json").write_text(text)
        (d / "requirements.txt").write_text(reqs)
    files = [(stage / "bundle.json", f"{ARCHIVE_STEM}/bundle.json"),
             (stage / "requirements.txt", f"{ARCHIVE_STEM}/requirements.txt")]
    files += [(p, f"{ARCHIVE_STEM}/wheels/{p.name}") for p in sorted(wheel_paths, key=lambda p: p.name)]
    files += [(p, f"{ARCHIVE_STEM}/sources/{p.name}") for p in sources or []]
    archive = work / (ARCHIVE_STEM + COMPRESSIONS[args.compress])
    t = time.monotonic()
    how = pack_archive(files, archive, args.compress, preset=args.xz_preset)
    size, digest = archive.stat().st_size, sha256_file(archive)
    plain = sum(p.stat().st_size for p, _ in files)
    log(f"[7/8] archive {archive.name}: {mib(size)} from {mib(plain)} of files ({how}, {time.monotonic() - t:.0f} s)")
    shutil.rmtree(parts_dir, ignore_errors=True)
    parts = split_file(archive, parts_dir, int(args.part_mib * MiB))
    (parts_dir / PARTS_JSON).write_text(json.dumps({
        "format": 1, "created": manifest["created"], "engines": manifest["engines"],
        "servebook_commit": manifest["servebook"]["commit"], "part_bytes": int(args.part_mib * MiB),
        "python": manifest["target"]["python_version"], "glibc": manifest["host_profile"]["glibc"],
        "archive": {"name": archive.name, "size": size, "sha256": digest, "compression": args.compress},
        "parts": parts}, indent=1) + "\n")
    if not args.keep_archive:
        archive.unlink()
    shutil.rmtree(stage)
    totals = ", ".join(f"{g} {t['wheels']} wheels {mib(t['bytes'])}" for g, t in manifest["totals"].items())
    log(f"[8/8] {len(parts)} parts of at most {args.part_mib:g} MiB in {parts_dir} (bundle {digest[:12]}); "
        f"{totals}; {time.monotonic() - t0:.0f} s in all")
    conflicts = [r for r in manifest["host_requirements"] if r["status"] == "conflict"]
    for r in conflicts:
        log(f"  note: {r['required_by']} asks {r['name']}{r['specifier']}, the host lists {r['host_version']}")


# ---------------------------------------------------------------------------------------------------- host side


def exports(target: Path) -> list[str]:
    return [f"export PYTHONPATH={target}${{PYTHONPATH:+:$PYTHONPATH}}", f"export PATH={target}/bin:$PATH"]


def check_host_requirements(rows: list[dict]) -> list[str]:
    """The host's own versions against what the bundle asks of them; lines for those not met."""
    import importlib.metadata as md

    _, SpecifierSet, Version = _packaging()
    bad = []
    for row in rows:
        try:
            have = md.version(row["name"])
        except md.PackageNotFoundError:
            bad.append(f"{row['name']}: not installed on this host ({row['required_by']} asks {row['specifier']})")
            continue
        if row["specifier"] != "any" and not SpecifierSet(row["specifier"]).contains(Version(have), prereleases=True):
            bad.append(f"{row['name']} {have}: {row['required_by']} asks {row['specifier']}")
    return sorted(set(bad))


def _pip_install_args(stage: Path, target: Path, bundle: dict, dry_run: bool) -> list[str]:
    wheels = sorted(str(p) for p in (stage / "wheels").glob("*.whl"))
    names = [wheel_name(Path(w).name) for w in wheels]
    if len(set(names)) != len(names) or len(wheels) != len(bundle["wheels"]):
        raise BundleError(f"the archive holds {len(wheels)} wheels, bundle.json lists {len(bundle['wheels'])}")
    args = ["install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--disable-pip-version-check",
            "--target", str(target)]
    if dry_run:
        t = bundle["target"]
        args += ["--dry-run", "--ignore-installed", "--only-binary=:all:", "--python-version", t["python_version"],
                 "--implementation", t["implementation"]]
        for abi in t["abis"]:
            args += ["--abi", abi]
        for tag in t["platforms"]:
            args += ["--platform", tag]
    return args + wheels


def import_modules(engines: list[str]) -> list[str]:
    """What `install` imports to check the bundle: servebook and each engine carried as wheels. An engine carried as
    a source distribution (llama.cpp) is no module: the host builds it, and importing it failed a bundle of vLLM and
    llama.cpp together."""
    names = [normalize(e.partition("==")[0]) for e in engines]
    return ["servebook"] + [n.replace("-", "_") for n in names if n not in SOURCE_ENGINES]


def _import_check(target: Path, bundle: dict) -> list[str]:
    modules = import_modules(bundle["engines"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")])))
    failed = []
    for mod in modules:
        proc = subprocess.run([sys.executable, "-c", f"import {mod}"], env=env, capture_output=True, text=True)
        state = "ok" if proc.returncode == 0 else "FAILED: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
        log(f"  import {mod}: {state}")
        if proc.returncode:
            failed.append(mod)
    return failed


def install(args) -> int:
    dirs = [Path(d) for d in args.parts]
    target = Path(args.target).resolve()
    manifest, _ = load_parts_manifest(dirs)
    digest = manifest["archive"]["sha256"]
    marker = target / MARKER
    if marker.is_file() and not args.force and not args.dry_run:
        done = json.loads(marker.read_text())
        if done.get("archive_sha256") == digest:
            log(f"bundle {digest[:12]} ({', '.join(manifest['engines']) or 'servebook only'}) is already installed "
                f"in {target}: nothing to do")
            print("\n".join(exports(target)))
            return 0
    if target.exists() and any(target.iterdir()) and not marker.is_file() and not args.force:
        raise BundleError(f"{target} exists, is not empty and holds no bundle: choose another --target or --force")
    rows = part_status(dirs, manifest)
    bad = [r for r in rows if r["state"] != "ok"]
    if bad:
        for r in bad:
            log(f"{r['name']}: {r['state']}{' at ' + r['path'] if r['path'] else ''}")
        log(f"{len(bad)} of {len(rows)} parts missing or damaged: nothing installed")
        return 2
    libc = " ".join(platform.libc_ver())
    log(f"parts: {len(rows)} checked ({mib(sum(r['size'] for r in rows))}); this host: Python "
        f"{platform.python_version()}, {libc or 'libc ?'}, {platform.machine()}; the bundle is for Python "
        f"{manifest.get('python', '?')}, glibc {manifest.get('glibc', '?')}")
    work = Path(tempfile.mkdtemp(prefix=".sb-work-", dir=target.parent))
    try:
        return _install_from(work, dirs, manifest, target, args)
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)


def _install_from(work: Path, dirs: list[Path], manifest: dict, target: Path, args) -> int:
    archive = work / manifest["archive"]["name"]
    t = time.monotonic()
    digest = join_parts(dirs, manifest, archive)
    log(f"joined {archive.name}: {mib(archive.stat().st_size)}, sha256 {digest[:12]} ok ({time.monotonic() - t:.1f} s)")
    t = time.monotonic()
    how = unpack_archive(archive, work, manifest["archive"]["compression"])
    archive.unlink()
    stage = work / ARCHIVE_STEM
    bundle = json.loads((stage / "bundle.json").read_text())
    log(f"unpacked {len(bundle['wheels'])} wheels ({how}, {time.monotonic() - t:.1f} s)")
    fresh = work / "site"
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pip", *_pip_install_args(stage, fresh, bundle, args.dry_run)],
                          capture_output=True, text=True)
    if proc.returncode:
        raise BundleError(f"pip install failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
    log(f"pip install{' --dry-run' if args.dry_run else ''}: {len(bundle['wheels'])} wheels ok "
        f"({time.monotonic() - t:.1f} s)")
    unmet = check_host_requirements(bundle.get("host_requirements", []))
    for line in unmet:
        log(f"  host package not as the bundle asks: {line}")
    if unmet:
        log("  (the host's own versions are used; `build --carry NAME` brings the bundle's own of NAME)")
    if args.dry_run:
        return 0
    if (stage / "sources").is_dir():  # what the host builds itself (llama.cpp's sdist), kept beside the packages
        shutil.copytree(stage / "sources", fresh / "sources")
    if target.exists():
        shutil.rmtree(target)
    fresh.rename(target)
    failed = [] if args.no_import_check else _import_check(target, bundle)
    (target / MARKER).write_text(json.dumps({
        "archive_sha256": digest, "engines": bundle["engines"], "wheels": len(bundle["wheels"]),
        "servebook_commit": bundle["servebook"]["commit"], "import_failed": failed,
        "installed": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}, indent=1) + "\n")
    (target / "env.sh").write_text("\n".join(exports(target)) + "\n")
    log(f"installed bundle {digest[:12]} into {target}; to use it (or `. {target}/env.sh`):")
    print("\n".join(exports(target)))
    return 1 if failed else 0


def check(args) -> int:
    dirs = [Path(d) for d in args.parts]
    manifest, where = load_parts_manifest(dirs)
    a = manifest["archive"]
    log(f"{where}: bundle {a['sha256'][:12]} ({', '.join(manifest['engines']) or 'servebook only'}), {a['name']} "
        f"{mib(a['size'])}, {len(manifest['parts'])} parts, made {manifest['created']}")
    rows = part_status(dirs, manifest, verify=not args.quick)
    for r in rows:
        log(f"  {r['name']}  {mib(r['size']):>10}  {r['state']}{'  ' + r['path'] if r['path'] else ''}")
    known = {p["name"] for p in manifest["parts"]} | {PARTS_JSON}
    for d in dirs:
        for extra in sorted(p.name for p in d.iterdir() if p.name not in known) if d.is_dir() else []:
            log(f"  (not a part of this bundle: {d / extra})")
    missing = [r["name"] for r in rows if r["state"] == "missing"]
    damaged = [r["name"] for r in rows if r["state"] not in ("ok", "missing")]
    log(f"missing: {', '.join(missing) or 'none'}; damaged: {', '.join(damaged) or 'none'}")
    if damaged:
        return FAILED
    if missing:
        log(f"waiting for {len(missing)} of {len(rows)} parts: carry the next (exit {WAITING})")
        return WAITING
    return 0


def collect(args) -> int:
    """Copy the parts (and parts.json) that are in --from into --into, each checked, then say what is missing."""
    src, into = Path(args.source), Path(args.into)
    into.mkdir(parents=True, exist_ok=True)
    manifest, where = load_parts_manifest([src, into])
    if where.parent != into:
        shutil.copy2(where, into / PARTS_JSON)
    have = {r["name"]: r["state"] for r in part_status([into], manifest)}
    damaged = []
    for row in part_status([src], manifest):
        if row["state"] == "ok" and have[row["name"]] != "ok":
            shutil.copy2(row["path"], into / row["name"])
            log(f"copied {row['name']} ({mib(row['size'])})")
        elif row["state"] not in ("ok", "missing") and have[row["name"]] != "ok":
            log(f"{row['name']} in {src} is damaged ({row['state']}): carry it again")
            damaged.append(row["name"])
    args.parts, args.quick = [str(into)], False
    status = check(args)
    return FAILED if damaged else status  # a part that arrived damaged fails the call, whatever else is missing


# ---------------------------------------------------------------------------------------------------- cli


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="resolve, download and pack a bundle (needs PyPI)",
                       formatter_class=argparse.RawTextHelpFormatter)
    b.add_argument("--engine", action="append", required=True, help="a pinned engine, e.g. vllm==0.26.0 (repeat), or none")
    b.add_argument("--host", required=True, help="the host profile, e.g. data/gpu-hosts/lent-h200.txt")
    b.add_argument("--out", default=".bundle", help="output folder (parts/ in it is what to carry)")
    b.add_argument("--part-mib", type=float, default=None,
                   help="largest part, MiB (default: what fits a 64 MiB call beside this checkout's working tree;\n"
                        "`size` says how large that is, and why)")
    b.add_argument("--compress", choices=sorted(COMPRESSIONS), default="xz-stored",
                   help="xz-stored (default): the wheels re-zipped without deflate, then tar | xz -6 -T0;\n"
                        "  the vllm==0.26.0 bundle: 253 MiB, 4.5 min to pack on 2 cores,\n"
                        "  6 s to unpack on 2 (11 s with Python's lzma)\n"
                        "xz: the wheels as they are, through xz: 365 MiB, 3.7%% smaller than none\n"
                        "none: plain tar, 379 MiB, packed in a second")
    b.add_argument("--xz-preset", type=int, default=6)
    b.add_argument("--extra", action="append", default=[],
                   help="one of servebook's optional groups to carry too, e.g. router (repeat)")
    b.add_argument("--exclude", action="append", default=[], help="another package never to carry (repeat)")
    b.add_argument("--carry", action="append", default=[],
                   help="carry this package although the host has it, e.g. a newer one than the host's (repeat)")
    b.add_argument("--no-auto-carry", action="store_true",
                   help="use the host's version even where an engine pins another exactly (by default the engine's "
                        "pin is carried, with what that version refuses of the host's)")
    b.add_argument("--cache", default=str(DEFAULT_CACHE), help="downloads and pip kept here (default %(default)s)")
    b.add_argument("--keep-archive", action="store_true", help="keep the whole archive in OUT/work")
    b.add_argument("--strict", action="store_true",
                   help="the host's known versions as pip constraints: fail where the closure asks another")
    i = sub.add_parser("install", help="check, join, unpack and pip-install a bundle (on the host)")
    i.add_argument("--parts", action="append", required=True, help="folder with the parts (repeat to search several)")
    i.add_argument("--target", required=True, help="install here; put it on PYTHONPATH and TARGET/bin on PATH")
    i.add_argument("--force", action="store_true", help="install even when this bundle is there already")
    i.add_argument("--dry-run", action="store_true",
                   help="everything but the install: pip --dry-run for the bundle's Python and platform")
    i.add_argument("--no-import-check", action="store_true", help="skip importing servebook and the engines")
    i.add_argument("--keep-work", action="store_true")
    c = sub.add_parser("check", help="which parts are there, missing or damaged", epilog=EXIT_STATUSES,
                       formatter_class=argparse.RawTextHelpFormatter)
    c.add_argument("--parts", action="append", required=True)
    c.add_argument("--quick", action="store_true", help="sizes only, no sha256")
    g = sub.add_parser("collect", help="copy the parts that arrived into one folder and check it",
                       epilog=EXIT_STATUSES, formatter_class=argparse.RawTextHelpFormatter)
    g.add_argument("--from", dest="source", required=True)
    g.add_argument("--into", required=True)
    z = sub.add_parser("size", help="the part size build would use, and why (what travels beside each part)")
    z.add_argument("--part-mib", type=float, default=None, help="check this part size instead")
    z.add_argument("--bundle-mib", type=float, default=VLLM_BUNDLE_MIB,
                   help="a bundle's size, to say how many calls it takes (default: vllm==0.26.0's, %(default)s)")
    z.add_argument("--quiet", action="store_true", help="print the part size in MiB alone")
    return p


def size(args) -> int:
    """What a call carries beside each part, and the part size `build` would use (nothing is resolved or built)."""
    tree = carried_tree(REPO)
    part_mib = args.part_mib if args.part_mib is not None else fitting_part_mib(tree)
    if args.quiet:
        print(f"{part_mib:g}")
        return 0
    lines, warnings = sizing(tree, part_mib, args.bundle_mib)
    for line in lines:
        log(line)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr, flush=True)
    return 2 if tree is not None and part_mib > CARRY_MIB - tree.mib - PARTS_JSON_MIB - CARRY_MARGIN_MIB else 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cmd == "build":
        tree = carried_tree(REPO)
        if args.part_mib is None:
            args.part_mib = fitting_part_mib(tree)
        lines, warnings = sizing(tree, args.part_mib)
        log("[0/8] " + lines[0] + "".join(f"\n      {line}" for line in lines[1:]))
        for line in warnings:  # before minutes of resolving and downloading: a user may stop here
            print(f"warning: {line}", file=sys.stderr, flush=True)
    try:
        return {"build": build, "install": install, "check": check, "collect": collect, "size": size}[args.cmd](args)
    except BundleError as e:
        print(f"gpu_bundle {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
