"""A stand-in for JAX in the tests (JAX is not installable here): device_put
copies to an owned NumPy array, as a host device would."""

import numpy as np

from . import numpy  # noqa: F401

calls = []


def device_put(x, device=None):
    calls.append(x.shape)
    return np.array(x, copy=True)
