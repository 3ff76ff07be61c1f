"""jax.numpy of the test stand-in: NumPy."""

from numpy import *  # noqa: F401,F403
