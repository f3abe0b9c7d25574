"""``benchmarks/queue.py --json``: the queue benchmark, whose body is ``queueing.py`` beside this file.

This file's name is the standard library's ``queue``, and a script runs with its own folder first on
``sys.path``. So, run as a script, it takes that folder off the path before anything is imported and
runs ``queueing.py``; imported as ``queue`` by another script of this folder (through
``multiprocessing`` or ``concurrent.futures``), it puts the standard library's module in its place,
so that script gets what it asked for. (``benchmarks/__init__.py`` makes mypy see this file as
``benchmarks.queue``, not as the standard library's.)
"""

import importlib.machinery
import importlib.util
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ELSEWHERE = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != HERE]

if __name__ == "__main__":
    sys.path[:] = ELSEWHERE
    runpy.run_path(os.path.join(HERE, "queueing.py"), run_name="__main__")
else:
    spec = importlib.machinery.PathFinder.find_spec("queue", ELSEWHERE)
    assert spec is not None and spec.loader is not None, "the standard library has a queue module"
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)
