"""``python -m mdmem``: the ``mdmem`` command through a named interpreter.

git runs the merge driver as ``<interpreter> -m mdmem merge-driver ...`` (what ``mdmem init``
records per clone), so it works whether or not ``mdmem`` is on git's PATH.
"""

from mdmem.console import main

if __name__ == "__main__":
    main()
