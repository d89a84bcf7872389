"""Build the LD_PRELOAD shim (native/) into the package at install time.

It is a plain shared library, not a Python module: setuptools' Extension is only the portable
way to have `pip install` compile C with the interpreter's toolchain. `mokkafs preload-env`
finds it next to the package's modules.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "mokkafs._preload",
            sources=["native/mokkafs_preload.c", "native/path_map.c"],
            extra_compile_args=["-Wall", "-Wextra", "-Werror", "-U_FORTIFY_SOURCE", "-O2"],
            libraries=["dl"],
        )
    ]
)
