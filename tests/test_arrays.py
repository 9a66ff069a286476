"""numpy helpers of the predict command (core/arrays.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from pixelpipe.core.arrays import distinct


def test_distinct_is_np_unique_without_importing_numpy_ma():
    """core.arrays.distinct: np.unique's sorted distinct values (an empty array too), in a process where numpy.ma
    stays unimported (numpy 2.4's np.unique alone imports it: 1.2 MiB of the predict command's peak)."""
    values = np.array([5, 3, 5, 0, 3, 9], np.int64)
    np.testing.assert_array_equal(distinct(values), np.unique(values))
    assert distinct(np.zeros(0, np.uint32)).dtype == np.uint32 and len(distinct(np.zeros(0, np.uint32))) == 0
    code = ("import sys, numpy as np; from pixelpipe.core.arrays import distinct; distinct(np.arange(3)); "
            "print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]
