"""`python -m tinyattn`: the command line (see `tinyattn_tools/cli.py`)."""
from tinyattn_tools.cli import console_main

if __name__ == "__main__":
    console_main()
