"""mokkafs's libnvidia-ml exports the whole NVML API and nothing else: every name of
native/nvml/exports.h (the NVML 13.3 header's functions), so a go-nvml program never dies of a
missing symbol; every name a consumer looks up is among them; a name the library does not
implement answers NOT_SUPPORTED; and nvmlErrorString knows every code."""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

import pytest

from mokkafs.delivery.nvml import SONAME, library_dir
from tests.helpers.mounts import REPO
from tests.helpers.tools import require_tool

NVML = REPO / "native" / "nvml"
NOT_SUPPORTED, UNKNOWN = 3, 999


def listed() -> set[str]:
    return set(re.findall(r"^NVML_NAME\((\w+)\)$", (NVML / "exports.h").read_text(), re.M))


def consumers() -> set[str]:
    lines = (REPO / "tests/data/nvml/consumers.txt").read_text().splitlines()
    return {line for line in lines if line and not line.startswith("#")}


def codes() -> dict[str, int]:
    """nvmlReturn_t's values, from the library's own declarations."""
    text = (NVML / "nvml_api.h").read_text()
    return {k: int(v) for k, v in re.findall(r"^\s+(NVML_(?:SUCCESS|ERROR_\w+)) = (\d+),?$",
                                             text, re.M)}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """native/'s own build of the library (warnings are errors)."""
    require_tool("make")
    out = tmp_path_factory.mktemp("nvml")
    subprocess.run(["make", "-s", "-C", str(REPO / "native"), f"OUT={out}",
                    f"{out}/{SONAME}"], check=True, timeout=300)
    return out / SONAME


@pytest.fixture(params=["installed", "make"])
def library(request: pytest.FixtureRequest, made: Path) -> Path:
    return library_dir() / SONAME if request.param == "installed" else made


def exported(library: Path) -> dict[str, str]:
    """Every defined dynamic symbol and its nm type (T: implemented, W: a weak stub)."""
    out = subprocess.run([require_tool("nm"), "-D", "--defined-only", str(library)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return {f[2]: f[1] for f in (line.split() for line in out.splitlines()) if len(f) == 3}


def test_the_names_list_is_the_whole_api() -> None:
    names = listed()
    assert len(names) >= 400  # NVML 13.3 declares 413 functions
    assert consumers() <= names, sorted(consumers() - names)
    assert {"nvmlInit", "nvmlInit_v2", "nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2",
            "nvmlDeviceGetPciInfo_v3", "nvmlEventSetWait_v2",
            "nvmlDeviceGetComputeRunningProcesses_v3"} <= names


def test_the_library_exports_exactly_the_api(library: Path) -> None:
    symbols = exported(library)
    assert set(symbols) - {"_init", "_fini"} == listed()
    # the implemented ones are strong definitions, the rest weak stubs
    assert symbols["nvmlDeviceGetMemoryInfo"] == "T"
    assert symbols["nvmlDeviceGetEncoderUtilization"] == "W"


def test_unversioned_name_and_soname(library: Path) -> None:
    out = subprocess.run([require_tool("readelf"), "-d", str(library)], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    assert f"Library soname: [{SONAME}]" in out
    unversioned = library.parent / "libnvidia-ml.so"  # nvtop opens this name first
    assert unversioned.resolve() == library.resolve()


def test_every_stub_answers_not_supported(library: Path) -> None:
    lib = ctypes.CDLL(str(library))
    stubs = sorted(name for name, kind in exported(library).items() if kind == "W")
    assert len(stubs) > 250  # most of the API: what is implemented is the fewer
    for name in stubs:  # a stub reads no argument, so none need be passed
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int
        assert fn() == NOT_SUPPORTED, name


def test_error_strings_know_every_code(library: Path) -> None:
    fn = ctypes.CDLL(str(library)).nvmlErrorString
    fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_int]
    known = codes()
    assert len(known) == 32 and known["NVML_ERROR_DRIVER_NOT_LOADED"] == 9
    texts = {code: fn(code).decode() for code in known.values()}
    assert len(set(texts.values())) == len(texts)  # one text each
    assert texts[UNKNOWN] == "Unknown Error"
    assert all(text != "Unknown Error" for code, text in texts.items() if code != UNKNOWN)
    assert fn(31).decode() == fn(-1).decode() == fn(12345).decode() == "Unknown Error"
