"""Benchmarks of data echoing; ``python -m benchmarks`` lists them with one line each.

Importing this package quiets TensorFlow's C++ start-up lines (CUDA probes, cuInit
errors, CPU feature notes), which would bury the tables the benchmarks print, unless the
user has set ``TF_CPP_MIN_LOG_LEVEL`` themselves.
"""

import os
import sys
import tempfile


def _import_tensorflow_quietly() -> None:
    """Imports TensorFlow and finds its devices with the process's stderr sent aside.

    ``TF_CPP_MIN_LOG_LEVEL`` is not enough on its own: the lines TensorFlow 2.21 writes
    before absl's logging is initialised ignore it (``python -c "import tensorflow"`` with
    the variable at 3 still prints them). So stderr is pointed at a temporary file while
    TensorFlow loads and probes its devices. If that fails, what was written is replayed,
    so nothing that explains an error is lost.
    """
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return  # The user chose their logging, or TensorFlow is loaded already.
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as aside:
        os.dup2(aside.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # The cuInit probe logs here, not at import.
        except BaseException:
            os.dup2(saved, 2)
            aside.seek(0)
            sys.stderr.write(aside.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


_import_tensorflow_quietly()

# Progress lines (one per configuration and evaluation) should reach a log file as they
# happen, not when a buffer fills.
if hasattr(sys.stdout, "reconfigure"):
    sys.stdout.reconfigure(line_buffering=True)
