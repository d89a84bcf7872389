"""Build native/ into the package at install time: the LD_PRELOAD shim, the static
createContainer hook, the kmsg mount's process (libfuse3's low-level API), and mokkafs's NVML
(``mokkafs/lib/libnvidia-ml.so.1``, with ``libnvidia-ml.so`` linked to it; docs/nvml.md).

The shim is a plain shared library, not a Python module: setuptools' Extension is only the
portable way to have `pip install` compile C with the interpreter's toolchain. The hook is a
static executable (a Kubernetes node runs the DaemonSet's copy of it). The kmsg mount's process
links libfuse3 dynamically, as pyfuse3 does in the same image. All are found next to the
package's modules (mokkafs.delivery.preload, mokkafs.delivery.cdi, mokkafs.serve.kmsg,
mokkafs.delivery.nvml).
"""

import shlex
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

WARNINGS = ["-Wall", "-Wextra", "-Werror"]
NVML = Path("native/nvml")  # every C file there is the library's
NVML_SONAME = "libnvidia-ml.so.1"


class BuildNative(build_ext):
    def run(self) -> None:
        super().run()
        base = Path(".") if self.inplace else Path(self.build_lib)
        out = base / "mokkafs" / "bin"
        out.mkdir(parents=True, exist_ok=True)
        objects = self.compiler.compile(["native/mokkafs_hook.c"], output_dir=self.build_temp,
                                        extra_postargs=[*WARNINGS, "-O2"])
        self.compiler.link_executable(objects, "mokkafs-hook", output_dir=str(out),
                                      libraries=["json-c"], extra_postargs=["-static"])
        fuse = [shlex.split(pkg_config(flag)) for flag in ("--cflags", "--libs")]
        objects = self.compiler.compile(["native/mokkafs_kmsg.c", "native/kmsg_relay.c",
                                         "native/kmsg_pollers.c"], output_dir=self.build_temp,
                                        depends=["native/kmsg_relay.h", "native/kmsg_pollers.h"],
                                        extra_postargs=[*WARNINGS, "-O2", "-pthread", *fuse[0]])
        self.compiler.link_executable(objects, "mokkafs-kmsg", output_dir=str(out),
                                      extra_postargs=["-pthread", *fuse[1]])
        self.build_nvml(base / "mokkafs" / "lib")

    def build_nvml(self, lib: Path) -> None:
        """The NVML library: only the API's names exported; nvtop opens the unversioned name."""
        lib.mkdir(parents=True, exist_ok=True)
        objects = self.compiler.compile(
            sorted(str(source) for source in NVML.glob("*.c")), output_dir=self.build_temp,
            extra_postargs=[*WARNINGS, "-Wshadow", "-Wstrict-prototypes", "-O2", "-fPIC",
                            "-fvisibility=hidden", "-pthread"])
        self.compiler.link_shared_object(
            objects, NVML_SONAME, output_dir=str(lib),
            extra_postargs=["-pthread", f"-Wl,-soname,{NVML_SONAME}"])
        unversioned = lib / "libnvidia-ml.so"
        unversioned.unlink(missing_ok=True)
        unversioned.symlink_to(NVML_SONAME)


def pkg_config(flag: str) -> str:
    try:
        return subprocess.run(["pkg-config", flag, "fuse3"], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"building mokkafs-kmsg needs pkg-config and libfuse3's headers "
                         f"(apt-get install pkg-config libfuse3-dev): {exc}") from None


setup(
    ext_modules=[
        Extension(
            "mokkafs._preload",
            sources=["native/mokkafs_preload.c", "native/path_map.c"],
            depends=["native/path_map.h", "native/path_prefixes.h"],
            extra_compile_args=[*WARNINGS, "-U_FORTIFY_SOURCE", "-O2"],
            libraries=["dl"],
        )
    ],
    cmdclass={"build_ext": BuildNative},
)
