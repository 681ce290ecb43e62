"""`python -m bertviz_lab` runs the command line (see bertviz_lab/cli/)."""

import sys

from bertviz_lab.cli import main

sys.exit(main())
