"""pytest's entry for tests/: puts tests/ on sys.path (rootdir conftest), so
every suite, tests/http included, imports the shared helpers as `testlib`.
The helpers live there, not here: a second conftest.py (tests/http/) would
shadow this module under the name "conftest"."""
