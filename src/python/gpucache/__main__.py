"""`python -m gpucache ARGS` runs the gpucache command installed with this package, so scripts need
neither the environment's bin on PATH nor a build folder."""
import sys

from ._cli import main

sys.exit(main())
