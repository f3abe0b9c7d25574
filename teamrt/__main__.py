"""``python -m teamrt``: the ``teamrt`` command."""

from teamrt.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
