"""``python -m echoing.service dispatcher|worker``: see :mod:`echoing.service.servers`."""

import sys

from echoing.service.servers import main

if __name__ == "__main__":
    sys.exit(main())
