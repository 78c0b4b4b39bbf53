import sys

from monitor_cb.cli import main

sys.exit(main())
