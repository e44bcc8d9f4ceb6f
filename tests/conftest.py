"""pytest's entry for tests/: puts tests/ on sys.path (rootdir conftest), so
every suite, tests/http included, imports the shared helpers as `testlib`,
and testlib puts tools/ there for the engines package (tools/engines).
The helpers live there, not here: a second conftest.py (tests/http/) would
shadow this module under the name "conftest".

An engine that cannot run here or cannot honour an option a test asks for
raises engines.Unsupported: the test is skipped with that reason."""
import pytest

import testlib  # noqa: F401  (tools/ on sys.path)
from engines import Unsupported


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "release_kernel: a kernel test for the release kernels only (slab "
        "figures, packaging): make check runs these on release 6.12 when the rest of "
        "6.12's kernel suites run on the debug kernel (make check-debug deselects them)")


def _unsupported_is_a_skip():
    try:
        return (yield)
    except Unsupported as e:
        pytest.skip(str(e))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _unsupported_is_a_skip())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _unsupported_is_a_skip())
