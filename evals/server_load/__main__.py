import sys

from evals.server_load.run import main

sys.exit(main())
