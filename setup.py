"""The C kernel of the reference model (mockserver/gpt/kernels/native.c), built as an optional
extension: everything else is in pyproject.toml.

Optional, because the package must install where no C compiler is: there the NumPy kernel
(mockserver/gpt/kernels/spec.py) computes the very same bits, only slower. The flags matter:
the kernel's arithmetic is defined operation by operation, so the compiler may not fuse a
multiply into an add (-ffp-contract=off) or reorder sums (never -ffast-math). MSVC has no
vector extensions: there the extension is not attempted.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FLAGS = ["-O3", "-std=gnu11", "-ffp-contract=off", "-fno-fast-math", "-fvisibility=hidden", "-Wno-psabi"]


class BuildKernel(build_ext):
    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "msvc":
            self.extensions = []
            return
        for ext in self.extensions:
            ext.extra_compile_args = FLAGS
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "mockserver.gpt.kernels._native",
            sources=["mockserver/gpt/kernels/native.c"],
            depends=["mockserver/gpt/kernels/native_body.h", "mockserver/gpt/kernels/native_isa.h"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildKernel},
)
