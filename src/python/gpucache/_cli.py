"""The gpucache command that `pip install` put beside this package, for scripts that run it:
`python -m gpucache ARGS` or gpucache.cli_path()."""
from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from ._gpucache import Error


def cli_path() -> str:
    """The path of the `gpucache` command: $GPUCACHE_CLI when set, else the one installed into
    this interpreter's environment (its scripts folder, also for `pip install --user`), else the
    first on PATH. Raises gpucache.Error saying what to do when there is none."""
    override = os.environ.get("GPUCACHE_CLI")
    if override:
        if not os.access(override, os.X_OK):
            raise Error(f"GPUCACHE_CLI={override}: not an executable file")
        return override
    folders = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    user_scheme = f"{os.name}_user"
    if user_scheme in sysconfig.get_scheme_names():
        folders.append(sysconfig.get_path("scripts", user_scheme))
    for folder in folders:
        candidate = os.path.join(folder, "gpucache")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("gpucache")
    if found:
        return found
    raise Error("the gpucache command is not installed beside this package (looked in "
                f"{', '.join(folders)} and PATH): install the package with pip (it installs the "
                "command into the environment's bin), or set GPUCACHE_CLI to the command's path")


def main() -> int:
    """`python -m gpucache ARGS`: runs the installed command with ARGS."""
    command = cli_path()
    os.execv(command, [command, *sys.argv[1:]])
    return 0  # not reached: execv replaces this process
