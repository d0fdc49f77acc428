"""Build of the optional compiled accelerator (``gregor.protocol.records._scan``).

Everything else is declared in ``pyproject.toml``. The extension is optional: when it cannot
be compiled (no C compiler, no Python headers) the install goes on and ``gregor`` uses the
pure-Python reference ``gregor.protocol.records._scan_py``.
"""

from setuptools import Extension, setup


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without Cython: pure Python only
        return []
    ext = Extension(
        "gregor.protocol.records._scan",
        ["src/gregor/protocol/records/_scan.pyx"],
        extra_compile_args=["-O2"],
        optional=True,
    )
    return cythonize([ext], quiet=True, language_level=3)


setup(ext_modules=_extensions())
