"""``python -m archiver`` runs the ``archiver`` command."""

import sys

from archiver.cli import main

sys.exit(main())
