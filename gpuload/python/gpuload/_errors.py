"""Error type and return codes of the gpuload binding (gpuload.h)."""

GL_OK, GL_EOF = 0, 1
GL_ERR_INVALID, GL_ERR_NO_SHARD, GL_ERR_PLAN_MISMATCH, GL_ERR_CORRUPT = -1, -2, -3, -4
GL_ERR_CUDA, GL_ERR_RING_FULL, GL_ERR_CLOSED, GL_ERR_IO = -5, -6, -7, -8
GL_ERR_NO_SHARD_SET, GL_ERR_OUTSIDE_PLAN = -9, -10
# Raised by the binding itself, never returned by the library.
GL_ERR_FORKED = -100       # the library was loaded before this process forked
GL_ERR_NO_LIBRARY = -101   # libgpuload.so missing, stale or of another ABI version


class GpuloadError(Exception):
    """A failed gpuload call: ``.code`` is the GL_ERR_* code, ``str()`` the
    message (which names the file, epoch, rank or step concerned)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class ForkError(GpuloadError):
    """The native library was loaded in a parent process before it forked
    this one; a Go runtime does not survive fork, so it cannot be used here
    (code GL_ERR_FORKED)."""


class LibraryError(GpuloadError, OSError):
    """libgpuload.so is missing, older than its sources, or of another ABI
    version; the message names the command that builds it (code
    GL_ERR_NO_LIBRARY)."""
