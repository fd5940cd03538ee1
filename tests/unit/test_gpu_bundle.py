"""tools/gpu-host/gpu_bundle.py's pure parts: parts and their checks, the host profile, the drop rules and the closure walk;
and one install of a tiny synthetic bundle (pip --target, no network), twice."""

import hashlib
import importlib.util
import io
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu-host" / "gpu_bundle.py"


@pytest.fixture(scope="module")
def gb():
    spec = importlib.util.spec_from_file_location("gpu_bundle", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_bundle"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gpu_bundle", None)


def manifest_for(blob: bytes, parts: list[dict]) -> dict:
    return {"archive": {"name": "a.tar", "size": len(blob), "sha256": hashlib.sha256(blob).hexdigest(),
                        "compression": "none"}, "parts": parts, "engines": [], "created": "now"}


# ---------------------------------------------------------------------------------------------------- parts


@pytest.mark.parametrize("size, part, count", [(10_000, 3000, 4), (9000, 3000, 3), (10, 3000, 1), (0, 3000, 1)])
def test_split_then_join_gives_the_same_bytes(gb, tmp_path, size, part, count):
    blob = os.urandom(size)
    (tmp_path / "a.tar").write_bytes(blob)
    parts = gb.split_file(tmp_path / "a.tar", tmp_path / "parts", part)
    assert [p["name"] for p in parts] == [f"part-{i:03d}" for i in range(count)]
    assert all(p["size"] <= part for p in parts) and sum(p["size"] for p in parts) == size
    digest = gb.join_parts([tmp_path / "parts"], manifest_for(blob, parts), tmp_path / "joined")
    assert (tmp_path / "joined").read_bytes() == blob and digest == hashlib.sha256(blob).hexdigest()


def test_split_removes_the_parts_of_an_earlier_bundle(gb, tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100)
    gb.split_file(tmp_path / "a", tmp_path / "parts", 10)
    gb.split_file(tmp_path / "a", tmp_path / "parts", 50)
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["part-000", "part-001"]


def test_parts_may_lie_in_several_folders(gb, tmp_path):
    blob = os.urandom(5000)
    (tmp_path / "a").write_bytes(blob)
    parts = gb.split_file(tmp_path / "a", tmp_path / "one", 2000)
    (tmp_path / "two").mkdir()
    (tmp_path / "one" / "part-001").rename(tmp_path / "two" / "part-001")
    manifest = manifest_for(blob, parts)
    assert [r["state"] for r in gb.part_status([tmp_path / "one"], manifest)] == ["ok", "missing", "ok"]
    gb.join_parts([tmp_path / "one", tmp_path / "two"], manifest, tmp_path / "joined")
    assert (tmp_path / "joined").read_bytes() == blob


def test_a_damaged_part_is_named_and_nothing_is_joined_silently(gb, tmp_path):
    blob = os.urandom(5000)
    (tmp_path / "a").write_bytes(blob)
    parts = gb.split_file(tmp_path / "a", tmp_path / "p", 2000)
    manifest = manifest_for(blob, parts)
    damaged = bytearray((tmp_path / "p" / "part-001").read_bytes())
    damaged[7] ^= 1
    (tmp_path / "p" / "part-001").write_bytes(bytes(damaged))
    assert [r["state"] for r in gb.part_status([tmp_path / "p"], manifest)] == ["ok", "sha256", "ok"]
    with pytest.raises(gb.BundleError, match="part-001"):
        gb.join_parts([tmp_path / "p"], manifest, tmp_path / "joined")
    (tmp_path / "p" / "part-001").write_bytes(bytes(damaged[:-1]))
    assert gb.part_status([tmp_path / "p"], manifest)[1]["state"] == "size"


def test_the_whole_archive_sha_is_checked_too(gb, tmp_path):
    blob = os.urandom(3000)
    (tmp_path / "a").write_bytes(blob)
    parts = gb.split_file(tmp_path / "a", tmp_path / "p", 2000)
    manifest = manifest_for(blob + b"!", parts)
    with pytest.raises(gb.BundleError, match="joined archive"):
        gb.join_parts([tmp_path / "p"], manifest, tmp_path / "joined")


def test_a_missing_parts_json_says_what_to_carry(gb, tmp_path):
    with pytest.raises(gb.BundleError, match="parts.json"):
        gb.load_parts_manifest([tmp_path])


# ---------------------------------------------------------------------------------------------------- host profile

PROFILE = """# a host
# python: 3.12.3
# glibc: 2.31
torch==2.11.0   # the host's CUDA build
Huggingface_Hub==1.33.0
numpy==2.5.2
nvidia-cudnn-cu13
opencv-python-headless
cuda-bindings
local-thing @ file:///tmp/local_thing-1.0-py3-none-any.whl

aiohttp
"""


def test_the_host_profile_reads_versions_bare_names_and_the_target(gb):
    host = gb.parse_host_profile(PROFILE)
    assert host.python == "3.12.3" and host.glibc == "2.31" and host.machine == "x86_64"
    assert host.packages["torch"] == "2.11.0" and host.packages["huggingface-hub"] == "1.33.0"
    assert host.packages["aiohttp"] is None and host.packages["local-thing"] is None
    assert host.pinned == {"torch": "2.11.0", "huggingface-hub": "1.33.0", "numpy": "2.5.2"}
    assert host.python_tag() == "cp312"
    assert host.marker_env()["python_version"] == "3.12" and host.marker_env()["python_full_version"] == "3.12.3"


def test_the_platform_tags_stop_at_the_hosts_glibc(gb):
    tags = gb.parse_host_profile(PROFILE).platforms()
    assert tags[0] == "manylinux_2_31_x86_64" and "manylinux_2_32_x86_64" not in tags
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)


@pytest.mark.parametrize("text, match", [("torch==2.11.0\ntorch\n", "twice"), ("torch>=2\n", "name==version")])
def test_a_bad_host_profile_names_its_line(gb, text, match):
    with pytest.raises(gb.BundleError, match=match):
        gb.parse_host_profile(text, source="h.txt")


def test_the_shipped_profile_of_the_lent_h200(gb):
    host = gb.load_host_profile(ROOT / "data" / "gpu-hosts" / "lent-h200.txt")
    assert host.python.startswith("3.12") and host.machine == "x86_64"
    # the host's own pip freeze: every package with its version
    assert len(host.packages) > 150 and len(host.pinned) == len(host.packages) and host.glibc == "2.39"
    assert host.pinned["torch"] == "2.11.0" and host.pinned["transformers"] == "5.17.0"
    assert host.pinned["numpy"] == "2.5.2" and host.pinned["typing-extensions"] == "4.16.0"
    assert "pydantic" not in host.packages and "vllm" not in host.packages


# ---------------------------------------------------------------------------------------------------- drop rules


def test_drop_rules(gb):
    host = gb.parse_host_profile(PROFILE)
    kind = lambda name, **kw: (gb.drop_reason(name, host, **kw) or ("kept",))[0]
    assert kind("torch") == "host-pinned" and kind("HUGGINGFACE-hub") == "host-pinned"
    assert kind("nvidia-cudnn-cu13") == "host-unpinned" and kind("aiohttp") == "host-unpinned"
    assert kind("nvidia-cutlass-dsl") == "excluded" and kind("cuda-tile") == "excluded"
    assert kind("tilelang") == "excluded" and kind("PyNvVideoCodec") == "excluded"
    assert kind("tokenspeed-mla") == "excluded" and kind("torchaudio") == "excluded"
    assert kind("pydantic") == "kept" and kind("apache-tvm-ffi") == "kept" and kind("flashinfer-python") == "kept"
    assert kind("aiohttp", carry=frozenset({"aiohttp"})) == "kept"
    assert kind("pydantic", exclude=[("pydantic*", "test")]) == "excluded"
    assert "version not listed" in gb.drop_reason("aiohttp", host)[1]


def test_an_engines_exact_pin_and_what_the_pinned_package_refuses_are_carried(gb):
    # SGLang 0.5.17 on the lent H200: its transformers==5.12.1 against the host's 5.17.0 (which made SGLang fail at
    # import), and that transformers' tokenizers<=0.23.0 against the host's 0.23.2
    host = gb.parse_host_profile("transformers==5.17.0\ntokenizers==0.23.2\nnumpy==2.5.2\ntorch==2.11.0\n"
                                 "numba==0.68.0\nllvmlite==0.50.0\n")
    engines = {"sglang": {"requires_dist": ["transformers==5.12.1", "torch==2.11.0", "numpy<2.4", "numba==0.65.1",
                                            "torchao==0.9; python_version < '3.0'"]}}
    pinned = gb.refused_host_versions(engines, {"sglang"}, host, exact_only=True)
    assert sorted(pinned) == ["numba", "transformers"]  # a range the host misses (numpy<2.4) is no exact pin
    assert pinned["transformers"].words() == "sglang asks transformers==5.12.1, the host has 5.17.0"
    items = {**engines, "transformers": {"requires_dist": ["tokenizers<=0.23.0,>=0.22.0", "numpy>=1.17"]},
             "numba": {"requires_dist": ["llvmlite<0.48,>=0.47.0dev0", "numpy<2.5,>=1.22"]},
             "tokenizers": {"requires_dist": []}, "llvmlite": {"requires_dist": []}, "numpy": {"requires_dist": []}}
    carried, kept = gb.settle_auto_carry(pinned, items, host)
    assert sorted(carried) == ["tokenizers", "transformers"]
    assert carried["tokenizers"].asker == "transformers"
    # numba 0.65.1 would bring numpy 2.3.5 under the host's torch: the host's numba (which SGLang ran with) is kept,
    # and so is the llvmlite only that numba asked for
    assert sorted(kept) == ["llvmlite", "numba", "numpy"] and kept["numpy"].asker == "numba"
    assert gb.settle_auto_carry({}, items, host) == ({}, {})


def test_the_walk_never_enters_a_dropped_package(gb):
    host = gb.parse_host_profile(PROFILE)
    items = {
        "eng": {"requires_dist": ["a>=1", "torch==2.11.0", "tilelang==0.1", "d[x]", 'old; python_version < "3.12"',
                                  "numpy<2.4"]},
        "a": {"requires_dist": ["b", 'winonly; sys_platform == "win32"']},
        "b": {"requires_dist": ["aiohttp>=3.13"]},
        "d": {"requires_dist": ['e; extra == "x"', 'f; extra == "y"']},
        "e": {"requires_dist": []},
        "sympy": {"requires_dist": []},  # torch's: pip resolved it, nothing kept needs it
        "z3": {"requires_dist": []},  # tilelang's
    }
    closure = gb.walk_closure([("--engine", "eng==1")], items, host)
    assert set(closure.kept) == {"eng", "a", "b", "d", "e"}
    assert closure.kept["d"] == {"x"} and closure.required_by["e"] == {"d"}
    assert {n: e["kind"] for n, e in closure.dropped.items()} == {
        "torch": "host-pinned", "tilelang": "excluded", "aiohttp": "host-unpinned", "numpy": "host-pinned"}
    assert closure.dropped["aiohttp"]["required_by"] == {"b": ">=3.13"}
    rows = {r["name"]: r["status"] for r in gb.host_requirements(closure.dropped, host)}
    assert rows == {"torch": "ok", "aiohttp": "unknown", "numpy": "conflict"}


def test_the_walk_says_what_the_resolver_left_out(gb):
    host = gb.parse_host_profile(PROFILE)
    with pytest.raises(gb.BundleError, match="ghost"):
        gb.walk_closure([("servebook", "ghost")], {}, host)


def test_the_engines_own_pins_on_dropped_packages_are_not_roots(gb):
    host = gb.parse_host_profile(PROFILE)
    engines = {"vllm": {"requires_dist": ["numpy<2.5", "torch==2.11.0", "pydantic>=2.12", "fastapi[standard]<1",
                                          'bench; extra == "bench"', 'six>=1.16; python_version > "3.11"']}}
    roots = gb.direct_roots(engines, ["openai>=1.40", "aiohttp"], host)
    assert roots == {"vllm": ["pydantic>=2.12", "fastapi[standard]<1", "six>=1.16"], "servebook": ["openai>=1.40"]}


# ---------------------------------------------------------------------------------------------------- install


def tiny_wheel(where: Path, name: str, version: str) -> Path:
    path = where / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, text in files.items():
            z.writestr(n, text)
    return path


def tiny_bundle(gb, tmp_path: Path, compression: str, engines: tuple[str, ...] = ()) -> Path:
    wheels = [tiny_wheel(tmp_path, "sbtiny_a", "1.0"), tiny_wheel(tmp_path, "sbtiny_b", "2.0")]
    bundle = {"engines": list(engines), "servebook": {"commit": "abc"}, "host_requirements": [],
              "wheels": [{"name": w.name.split("-")[0], "filename": w.name} for w in wheels],
              "target": {"python_version": "3.12", "implementation": "cp", "abis": ["cp312", "abi3", "none"],
                         "platforms": ["manylinux_2_17_x86_64"]}}
    (tmp_path / "bundle.json").write_text(json.dumps(bundle))
    files = [(tmp_path / "bundle.json", "servebook-bundle/bundle.json")]
    files += [(w, f"servebook-bundle/wheels/{w.name}") for w in wheels]
    archive = tmp_path / ("a" + gb.COMPRESSIONS[compression])
    gb.pack_archive(files, archive, compression)
    parts = gb.split_file(archive, tmp_path / "parts", 700)
    manifest = manifest_for(archive.read_bytes(), parts)
    manifest["archive"]["compression"] = compression
    (tmp_path / "parts" / "parts.json").write_text(json.dumps(manifest))
    return tmp_path / "parts"


@pytest.mark.parametrize("compression", ["none", "xz"])
def test_install_checks_joins_installs_and_a_second_call_does_nothing(gb, tmp_path, capsys, compression):
    parts = tiny_bundle(gb, tmp_path, compression)
    target = tmp_path / "site"
    argv = ["install", "--parts", str(parts), "--target", str(target), "--no-import-check"]
    assert gb.main(argv) == 0
    assert (target / "sbtiny_a" / "__init__.py").is_file() and (target / "sbtiny_b-2.0.dist-info").is_dir()
    out = capsys.readouterr().out
    assert f"export PYTHONPATH={target}" in out and f"export PATH={target}/bin:$PATH" in out
    assert not list(tmp_path.glob(".sb-work-*"))
    assert gb.main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_the_import_check_imports_engine_wheels_and_skips_what_the_host_builds(gb, tmp_path, capsys):
    # a bundle of vLLM and llama.cpp once failed here: `import llamacpp` (a source distribution, no module) stopped
    # gpu-host.sh setup before the models and the engine build
    parts = tiny_bundle(gb, tmp_path, "none", engines=("sbtiny_a==1.0", "llamacpp==0.3.36"))
    assert gb.main(["install", "--parts", str(parts), "--target", str(tmp_path / "site")]) == 0
    out = capsys.readouterr().out
    assert "import sbtiny_a: ok" in out and "import servebook: ok" in out and "import llamacpp" not in out
    assert gb.import_modules(["sglang==0.5.17", "llamacpp==0.3.36"]) == \
        ["servebook", "sglang"]


def test_install_with_a_part_missing_installs_nothing(gb, tmp_path, capsys):
    parts = tiny_bundle(gb, tmp_path, "none")
    (parts / "part-001").unlink()
    assert gb.main(["install", "--parts", str(parts), "--target", str(tmp_path / "site")]) == 2
    assert "part-001: missing" in capsys.readouterr().out and not (tmp_path / "site").exists()
    assert gb.main(["check", "--parts", str(parts)]) == gb.WAITING  # missing is waiting, not failure
    assert "missing: part-001" in capsys.readouterr().out


def test_collect_gathers_parts_that_arrive_one_per_call(gb, tmp_path, capsys):
    parts = tiny_bundle(gb, tmp_path, "none")
    names = sorted(p.name for p in parts.glob("part-*"))
    into = tmp_path / "gathered"
    codes = []
    for name in names:  # each call carries parts.json and one part
        carried = tmp_path / f"carry-{name}"
        carried.mkdir()
        for f in ("parts.json", name):
            (carried / f).write_bytes((parts / f).read_bytes())
        codes.append(gb.main(["collect", "--from", str(carried), "--into", str(into)]))
    # waiting (3) on every part but the last, apart from failure (2): `receive && setup` sets up after the last
    assert codes == [3] * (len(names) - 1) + [0] and len(names) > 2
    assert "missing: none" in capsys.readouterr().out
    assert gb.main(["install", "--parts", str(into), "--target", str(tmp_path / "site"), "--no-import-check"]) == 0


def test_a_damaged_part_fails_collect_apart_from_waiting(gb, tmp_path, capsys):
    parts = tiny_bundle(gb, tmp_path, "none")
    (parts / "part-002").unlink()
    damaged = bytearray((parts / "part-001").read_bytes())
    damaged[3] ^= 1
    (parts / "part-001").write_bytes(bytes(damaged))
    assert gb.main(["collect", "--from", str(parts), "--into", str(tmp_path / "gathered")]) == gb.FAILED
    out = capsys.readouterr().out
    assert "part-001 in" in out and "damaged" in out and "carry it again" in out
    assert gb.main(["collect", "--from", str(tmp_path / "empty"), "--into", str(tmp_path / "none")]) == gb.FAILED
    assert "no parts.json" in capsys.readouterr().err


def test_a_stored_copy_of_a_wheel_keeps_every_member(gb, tmp_path):
    wheel = tiny_wheel(tmp_path, "sbtiny_c", "3.0")
    (tmp_path / "stored").mkdir()
    gb.stored_copy(wheel, tmp_path / "stored" / wheel.name)
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(tmp_path / "stored" / wheel.name) as b:
        assert [(i.filename, a.read(i)) for i in a.infolist()] == [(i.filename, b.read(i)) for i in b.infolist()]
        assert {i.compress_type for i in a.infolist()} == {zipfile.ZIP_DEFLATED}
        assert {i.compress_type for i in b.infolist()} == {zipfile.ZIP_STORED}


def test_the_newest_glibc_a_set_of_wheels_asks(gb):
    top, needers = gb.newest_platform([
        "pillow-13.0.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        "llvmlite-0.47.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "debugpy-1.8.22-cp312-cp312-manylinux_2_34_x86_64.whl", "pydantic-2.14.4-py3-none-any.whl"])
    assert top == (2, 34) and needers == ["debugpy-1.8.22-cp312-cp312-manylinux_2_34_x86_64.whl"]
    assert gb.newest_platform(["a-1-py3-none-any.whl"]) == ((0, 0), [])


def test_unpack_refuses_members_outside_the_folder(gb, tmp_path):
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("../evil")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises((tarfile.TarError, gb.BundleError)):  # the data filter's refusal, or the older check's
        gb.unpack_archive(archive, tmp_path / "out", "none")
    assert not (tmp_path / "evil").exists()


def test_llamacpp_travels_as_its_source_distribution_not_as_wheels(gb):
    assert gb._source_pins(["vllm==0.26.0", "llamacpp==0.3.36"]) == ["llama-cpp-python==0.3.36"]
    assert gb._engine_pins(["vllm==0.26.0", "llamacpp==0.3.36", "none"]) == ["vllm==0.26.0"]
    with pytest.raises(gb.BundleError, match="pin a version"):
        gb._source_pins(["llamacpp"])


def test_parts_fit_one_call_beside_the_working_tree(gb, tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "journal.bin").write_bytes(b"\0" * (39 * gb.MiB // 2))  # untracked, not ignored: it travels too
    (tmp_path / ".gitignore").write_text("ignored.bin\n")
    (tmp_path / "ignored.bin").write_bytes(b"\0" * (30 * gb.MiB))  # ignored: it stays behind
    assert 19.5 <= gb.tracked_tree_mib(tmp_path) < 19.51
    assert gb.default_part_mib(tmp_path) == 41.0
    assert gb.default_part_mib(tmp_path / "not-a-checkout") == 30.0


def tree(gb, tracked_mib: float, untracked_mib: float = 0.0):
    largest = [("data/big.bin", int(untracked_mib * gb.MiB), True)] if untracked_mib else []
    return gb.Tree(int(tracked_mib * gb.MiB), int(untracked_mib * gb.MiB), (100, 1 if untracked_mib else 0),
                   largest + [("lib/servebook", int(tracked_mib * gb.MiB), False)])


def test_parts_under_20_mib_are_said_with_why_and_what_to_do(gb):
    # the tree of issue 53: 56 MiB with the sample journals as folders, so parts of 4 MiB and 64 calls, unsaid
    small = tree(gb, 18.4, 37.6)
    lines, warnings = gb.sizing(small, gb.fitting_part_mib(small))
    assert gb.fitting_part_mib(small) == 4.0 and "64 calls" in warnings[0]
    assert "the working tree that travels with every call is 56.0 MiB" in warnings[0]
    assert "data/big.bin (37.6 MiB)" in warnings[0] and "git-ignore" in warnings[0]
    fresh = tree(gb, 18.4)
    lines, warnings = gb.sizing(fresh, gb.fitting_part_mib(fresh))
    assert gb.fitting_part_mib(fresh) == 42.0 and not warnings
    assert "18.4 MiB" in lines[0] and "parts of 42 MiB (a bundle of 253 MiB: 7 calls)" in lines[1]


def test_a_part_too_large_for_the_call_is_said_and_a_smaller_one_asked_for_is_not_blamed_on_the_tree(gb):
    fresh = tree(gb, 18.4)
    _, warnings = gb.sizing(fresh, 50)
    assert warnings == ["parts of 50 MiB do not fit one call beside a working tree of 18.4 MiB (at most 42 MiB): "
                        "the carrier refuses them; leave --part-mib out"]
    lines, warnings = gb.sizing(fresh, 10)
    assert not warnings and "42 MiB would fit" in lines[-1]


def test_size_prints_the_part_size_build_would_use(gb, capsys):
    assert gb.main(["size", "--quiet"]) == 0
    assert float(capsys.readouterr().out) == gb.default_part_mib(ROOT)
    assert gb.main(["size", "--part-mib", "63"]) == 2
    assert "do not fit one call" in capsys.readouterr().err


def test_a_fresh_clone_makes_parts_of_at_least_20_mib(gb):
    """Issue 53's acceptance: the README's bundle command, from a fresh clone, makes parts of 20 MiB or more. A fresh
    clone is the tracked tree alone (this checkout's untracked files left out)."""
    checkout = gb.carried_tree(ROOT)
    fresh = gb.Tree(checkout.tracked, 0, (checkout.files[0], 0), [])
    part = gb.fitting_part_mib(fresh)
    assert part >= gb.SMALL_PART_MIB, f"the tracked tree is {fresh.mib:.1f} MiB: parts of {part:g} MiB; " + \
        ", ".join(f"{name} {size / gb.MiB:.1f} MiB" for name, size, untracked in checkout.largest if not untracked)


def test_an_extra_adds_its_group_to_the_roots_and_an_unknown_one_is_named(gb):
    plain = gb.servebook_requirements(ROOT)
    with_router = gb.servebook_requirements(ROOT, ["router"])
    assert with_router[:len(plain)] == plain
    assert [r for r in with_router[len(plain):] if r.startswith("sglang-router")], with_router
    with pytest.raises(SystemExit, match="--extra routr: servebook has no such extra"):
        gb.servebook_requirements(ROOT, ["routr"])
