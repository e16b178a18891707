"""`python -m tinyattn`: the command line (see `tinyattn/tools/cli.py`)."""
from tinyattn.tools.cli import console_main

if __name__ == "__main__":
    console_main()
