"""Builds the C extension decoding._native from native/ (core: native/src, binding: native/binding.c)."""
import glob
import sys

from setuptools import Extension, setup

extra = [] if sys.platform == "win32" else ["-O3", "-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"]

setup(
    ext_modules=[
        Extension(
            "decoding._native",
            sources=["native/binding.c"] + sorted(glob.glob("native/src/*.c")),
            include_dirs=["native/include"],
            extra_compile_args=extra,
        )
    ]
)
