"""Puts bench/lib/ (the helpers the scenarios share) on sys.path, once for
every scenario: each script at bench/'s top level imports it before the
helpers,

    import benchlib  # noqa: F401  (bench/lib/ on sys.path)

and the helpers then import one another by module name, as they do when run
themselves (`python bench/lib/make_bench_models.py`). bench/ is not a package:
Python puts a script's own folder on sys.path, which is how this module is
found; code elsewhere (tests, scripts, bench/gpu/) puts bench/ there first."""
import sys
from pathlib import Path

LIB = Path(__file__).resolve().parent / "lib"
if str(LIB) not in sys.path:
    sys.path.insert(0, str(LIB))
