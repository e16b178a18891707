"""Chapter 3. Saving a model's parameters to a file and loading them back: `Module.save` and
`Module.load`, which this chapter adds to every layer, in the safetensors format
(tinyattn/safetensors.py: the format Hugging Face publishes weights in); and the NumPy .npz
checkpoints `save` wrote before it wrote safetensors, which `load` still reads."""
import os
import zipfile
import zlib

import numpy as np

from tinyattn.nn.module import Module, extends
from tinyattn.safetensors import (opened_to_read, read_safetensors, replaced_atomically,
                                  write_safetensors)


@extends(Module)
def save(self, path):
    """Save the parameters in the file `path`, under exactly that name (no extension is added,
    so `load(path)` finds it), as a safetensors file of arrays named as in `state_dict()`: the
    format Hugging Face and PyTorch read (`tinyattn/safetensors.py`). A save that fails leaves
    no half-written file.
    """
    with replaced_atomically(path, "save") as file:
        write_safetensors(file, self.state_dict())


@extends(Module)
def load(self, path):
    """Load the parameters from a file written by `save` (or an older .npz checkpoint, see
    `read_checkpoint`); returns self. A file that is not such a checkpoint, or one of another
    model, raises an error saying why, and changes nothing."""
    path = os.fspath(path)
    state = read_checkpoint(path)
    try:
        self.load_state_dict(state)
    except (ValueError, TypeError) as error:
        reason = str(error).removeprefix("load_state_dict: ")
        raise type(error)(f"load: the checkpoint {path!r} does not fit this "
                          f"{type(self).__name__}: {reason}") from None
    return self


def write_checkpoint(path, arrays):
    """Write {name: array} to the file `path` as a NumPy .npz archive, which `read_checkpoint`
    reads back: the format `Module.save` wrote before it wrote safetensors, kept for arrays that
    safetensors cannot hold, such as the strings of demo 11's vocabulary (nothing that needs
    pickle). The file is written whole or not at all (`replaced_atomically`).
    """
    with replaced_atomically(path, "save") as file:
        np.savez(file, **arrays)


def read_checkpoint(path):
    """{name: array} from a checkpoint file, or a clear error saying why the file is not one.

    A checkpoint is a safetensors file (`Module.save` writes one) or a NumPy .npz archive
    (`write_checkpoint`, and `Module.save` before safetensors): an .npz is a zip, which begins
    with the bytes ZIP_START, and anything else is read as safetensors. NumPy's own messages
    about a damaged .npz speak of pickles and zip internals: they are said in a sentence here.
    """
    not_a_checkpoint = f"load: {path!r} is not a tinyattn checkpoint"
    with opened_to_read(path, "load", "checkpoint file") as file:
        start = file.read(len(ZIP_START))
        if not start:
            raise ValueError(f"{not_a_checkpoint}: the file is empty")
        file.seek(0)
        if start != ZIP_START:
            try:
                return read_safetensors(file, os.fstat(file.fileno()).st_size)
            except ValueError as error:
                raise ValueError(f"{not_a_checkpoint} (safetensors, or NumPy .npz): "
                                 f"{error}") from None
        try:
            with np.load(file, allow_pickle=False) as archive:
                return {name: archive[name] for name in archive.files}
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            raise ValueError(f"{not_a_checkpoint}: the zip archive is damaged or cut short "
                             f"({error})") from None
        except ValueError as error:     # e.g. an array of Python objects, which only pickle reads
            raise ValueError(f"{not_a_checkpoint}: an entry of the archive cannot be read as an "
                             f"array of numbers ({error})") from None


ZIP_START = b"PK\x03\x04"          # the first bytes of every zip archive
