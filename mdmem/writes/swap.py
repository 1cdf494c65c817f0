"""Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``).

Replacing a file with ``os.replace`` drops whatever was at the path at that instant: a person's
save that landed a microsecond after our last check is gone. Exchanging instead leaves the
replaced file at the temp file's name, so the writer can look at exactly what it replaced and
merge a save it did not expect. Where the call is missing (other systems, old kernels, some
file systems), :func:`exchange` returns False and the caller falls back to check-then-replace.
"""

from __future__ import annotations

import errno
import os
import sys
from functools import lru_cache
from typing import Any

AT_FDCWD = -100
RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}
_unsupported_devices: set[int] = set()


@lru_cache(maxsize=1)
def _renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # (here: a process that only reads never loads it)

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.renameat2
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


def exchange(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Atomically swap the files at ``a`` and ``b``; False if this system cannot.

    Raises FileNotFoundError when either is missing (a save in progress may have moved the
    file away for a moment), and other OSErrors as they come.
    """
    func = _renameat2()
    if func is None:
        return False
    try:
        device = os.stat(b).st_dev
    except FileNotFoundError:
        raise
    if device in _unsupported_devices:
        return False
    result = func(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    if result == 0:
        return True
    import ctypes

    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        _unsupported_devices.add(device)
        return False
    raise OSError(err, os.strerror(err), os.fspath(b))
