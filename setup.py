"""Build of the optional compiled accelerators (``gregor.protocol.records._scan``, the record
walk, ``gregor.storage._append``, the log's produce fast path, with ``gregor.storage._index``,
its index appends, and ``gregor.client.producer._send``, the producer's per-record path).

Everything else is declared in ``pyproject.toml``. The extension is optional: when it cannot
be compiled (no C compiler, no Python headers) the install goes on and ``gregor`` uses the
pure-Python references (``_scan_py``, ``_append_py``, ``_index_py``, ``_send_py``).
"""

from setuptools import Extension, setup


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without Cython: pure Python only
        return []
    exts = [
        Extension(
            f"gregor.{name}",
            [f"src/gregor/{name.replace('.', '/')}.pyx"],
            extra_compile_args=["-O2"],
            optional=True,
        )
        for name in (
            "protocol.records._scan",
            "storage._index",  # before storage._append, which cimports it
            "storage._append",  # includes storage/_crc32c.h
            "client.producer._send",
        )
    ]
    # include_path: the accelerators cimport src/gregor/_tuples.pxd
    return cythonize(exts, quiet=True, language_level=3, include_path=["src"])


setup(ext_modules=_extensions())
