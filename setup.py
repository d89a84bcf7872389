"""Build native/ into the package at install time: the LD_PRELOAD shim and the static
createContainer hook.

The shim is a plain shared library, not a Python module: setuptools' Extension is only the
portable way to have `pip install` compile C with the interpreter's toolchain. The hook is a
static executable (a Kubernetes node runs the DaemonSet's copy of it). Both are found next to
the package's modules (mokkafs.delivery.preload, mokkafs.delivery.cdi).
"""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

WARNINGS = ["-Wall", "-Wextra", "-Werror"]


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
