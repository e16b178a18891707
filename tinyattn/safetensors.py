"""Chapter 3. Safetensors, read and written with NumPy: the format in which Hugging Face publishes
weights.

A safetensors file is three parts, one after the other:

    8 bytes      N, the length of the header: an unsigned 64-bit integer, little-endian
    N bytes      the header: a JSON object, UTF-8, perhaps padded at its end with spaces
                   {"wte": {"dtype": "F32", "shape": [50257, 768], "data_offsets": [0, 154389504]},
                    ...,
                    "__metadata__": {"format": "pt"}}           <- optional, strings to strings
    the rest     the data: each tensor's bytes, little-endian, in C order (last axis fastest),
                 from byte BEGIN to byte END of the data (`data_offsets`, counted from the first
                 byte after the header)

That is all: no pickle (loading runs no code), no compression, and a reader that knows where each
tensor lies can map the file into memory instead of reading it. The tensors tile the data: no two
overlap, no byte between them is left over (the `safetensors` package refuses both, and so does
`load_safetensors`), and each one's byte count is its number of elements times its item size.

The dtypes and their NumPy equivalents are in DTYPES. BF16 (bfloat16, the top 16 bits of a
float32) has none: it is read widened to float32, exactly, and cannot be written. The 8-, 6- and
4-bit float formats some files use (F8_E4M3, ...) have no NumPy dtype and are refused by name.
"""
import contextlib
import json
import math
import os
import reprlib
from collections import Counter

import numpy as np

from tinyattn.arguments import door

DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
          "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
          "I8": np.dtype("i1"), "U64": np.dtype("<u8"), "U32": np.dtype("<u4"),
          "U16": np.dtype("<u2"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
          "C64": np.dtype("<c8")}
STORED = {**DTYPES, "BF16": np.dtype("<u2")}    # BF16 is read as its 16 bits, then widened
NAMES = {dtype.newbyteorder("="): name for name, dtype in DTYPES.items()}    # float32 -> "F32"
METADATA = "__metadata__"
# JSON values quoted in an error message are cut short (strings, lists, objects, nesting): a
# malformed header may hold megabytes
SHORT = reprlib.Repr()
SHORT.maxlevel, SHORT.maxstring, SHORT.maxlong, SHORT.maxlist, SHORT.maxdict = 2, 50, 40, 4, 4


def load_safetensors(path, with_metadata=False):
    """{name: array} from the safetensors file `path`, in the order of its header; with
    `with_metadata=True`, (arrays, {key: value}) with the header's `__metadata__` strings.

    The data is read once into one buffer and each array is a view of its part of it (no copy),
    so reading a 500 MB file takes 500 MB. A file that is not a safetensors file raises a
    ValueError naming it and saying what is wrong.
    """
    return read_file(path, "load_safetensors", with_metadata=with_metadata)


def read_file(path, caller, what="file", with_metadata=False):
    """What `load_safetensors` returns, the errors naming `caller` (the function reading it) and
    `what` the file should be."""
    path = os.fspath(path)
    with opened_to_read(path, caller, what) as file:
        try:
            return read_safetensors(file, os.fstat(file.fileno()).st_size, with_metadata)
        except ValueError as error:
            raise ValueError(f"{caller}: {path!r} is not a safetensors file: {error}") from None


def read_safetensors(file, size, with_metadata=False):
    """What `load_safetensors` returns, from an open binary file of `size` bytes; a ValueError
    that says what is wrong (without naming the file) if it is not a safetensors file."""
    if size < 8:
        raise ValueError(f"it has {size} bytes, fewer than the 8 of the header length")
    header_length = int.from_bytes(file.read(8), "little")
    if header_length > size - 8:
        raise ValueError(f"the header length, {header_length} bytes, runs past the end of the "
                         f"file ({size} bytes)")
    entries, metadata = parse_header(file.read(header_length))
    check_tiling(entries, size - 8 - header_length)
    data = bytearray(size - 8 - header_length)
    file.readinto(data)
    arrays = {}
    for name, (dtype_name, shape, (begin, _)) in entries.items():
        raw = np.frombuffer(data, STORED[dtype_name], math.prod(shape), begin)
        try:
            raw = raw.reshape(shape)
        except ValueError as error:     # more axes than NumPy has, an axis past its index range
            raise ValueError(f"tensor {SHORT.repr(name)} has a shape of {len(shape)} axes, which "
                             f"NumPy cannot hold ({error})") from None
        arrays[name] = (raw.astype("<u4") << 16).view("<f4") if dtype_name == "BF16" else raw
    return (arrays, metadata) if with_metadata else arrays


def parse_header(header):
    """({name: (dtype name, shape, (begin, end))}, metadata) from the header's bytes, each entry
    checked: a known dtype, a shape of sizes >= 0, offsets that fit the shape."""
    try:
        header = json.loads(header.decode("utf-8"), object_pairs_hook=refuse_repeated_names,
                            parse_int=refuse_long_integers)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the header is not valid JSON ({error})") from None
    except RecursionError:      # json reads nested arrays and objects by recursion
        raise ValueError("the header nests JSON arrays or objects too deeply to be read (a "
                         "safetensors header nests them 3 deep)") from None
    if not isinstance(header, dict):
        raise ValueError(f"the header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop(METADATA, {})
    if not isinstance(metadata, dict) or not all(isinstance(value, str)
                                                 for value in metadata.values()):
        raise ValueError(f"{METADATA} must map strings to strings, got {SHORT.repr(metadata)}")
    entries = {}
    for name, entry in header.items():
        tensor = f"tensor {SHORT.repr(name)}"
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
            raise ValueError(f"{tensor} must have a dtype, a shape and data_offsets, "
                             f"got {SHORT.repr(entry)}")
        dtype_name, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dtype_name, str) or dtype_name not in STORED:
            raise ValueError(f"{tensor} has dtype {SHORT.repr(dtype_name)}, which tinyattn does "
                             f"not read (it reads {', '.join(DTYPES)} and BF16)")
        if not (is_list_of_sizes(shape) and is_list_of_sizes(offsets) and len(offsets) == 2
                and offsets[0] <= offsets[1]):
            raise ValueError(f"{tensor} must have a shape of integers >= 0 and data_offsets "
                             f"[BEGIN, END] with 0 <= BEGIN <= END, got shape {SHORT.repr(shape)} "
                             f"and data_offsets {SHORT.repr(offsets)}")
        item_size = STORED[dtype_name].itemsize
        if offsets[1] - offsets[0] != math.prod(shape) * item_size:
            raise ValueError(f"{tensor} of shape {SHORT.repr(tuple(shape))} and dtype "
                             f"{dtype_name} takes {math.prod(shape) * item_size} bytes, but its "
                             f"data_offsets {offsets} hold {offsets[1] - offsets[0]}")
        entries[name] = dtype_name, tuple(shape), tuple(offsets)
    return entries, metadata


def refuse_repeated_names(pairs):
    """A JSON object as a dict, refusing a name given twice (json.loads would keep the last)."""
    repeated = sorted(name for name, count in Counter(name for name, _ in pairs).items()
                      if count > 1)
    if repeated:
        raise ValueError(f"the header names {SHORT.repr(repeated)} more than once")
    return dict(pairs)


def refuse_long_integers(digits):
    """A JSON integer as an int, refusing one of more than 20 digits: no size or offset is (they
    are 64-bit), and Python would refuse one of thousands with advice that does not apply."""
    if len(digits.lstrip("-")) > 20:
        raise ValueError(f"the header holds an integer of {len(digits.lstrip('-'))} digits: "
                         f"sizes and offsets are 64-bit (at most 20 digits)")
    return int(digits)


def is_list_of_sizes(value):
    """A JSON list of integers >= 0 (true and false, which Python counts as ints, are not)."""
    return isinstance(value, list) and all(type(size) is int and size >= 0 for size in value)


def check_tiling(entries, data_size):
    """The tensors, in the order of their offsets, must tile the data: each begins where the one
    before it ends, the first at byte 0, the last ending at the end of the data."""
    position, previous = 0, None
    for name, (_, _, (begin, end)) in sorted(entries.items(), key=lambda item: item[1][2]):
        if end > data_size:
            raise ValueError(f"tensor {SHORT.repr(name)} ends at byte {end} of the data, past its "
                             f"end (the data has {data_size} bytes)")
        if begin < position:
            raise ValueError(f"tensor {SHORT.repr(name)} (bytes {begin} to {end} of the data) "
                             f"overlaps tensor {SHORT.repr(previous)}, which ends at byte "
                             f"{position}")
        if begin > position:
            raise ValueError(f"bytes {position} to {begin} of the data belong to no tensor")
        position, previous = end, name
    if position < data_size:
        raise ValueError(f"bytes {position} to {data_size} of the data belong to no tensor")


def arrays_and_metadata_fit(path, arrays, metadata=None):
    """The arrays a dict of NumPy arrays of a dtype the format has, under string names; the
    metadata None or a dict of strings."""
    if not isinstance(arrays, dict):
        raise TypeError(f"expected a dict of arrays, got {type(arrays).__name__}")
    for name, array in arrays.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be strings, got {name!r}")
        if name == METADATA:
            raise ValueError(f"{METADATA!r} is the name of the metadata, not a tensor name")
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{name!r} is a {type(array).__name__}, not a NumPy array")
        if array.dtype.newbyteorder("=") not in NAMES:
            raise TypeError(f"{name!r} has dtype {array.dtype}, which the format does not have "
                            f"(it has {', '.join(str(dtype) for dtype in NAMES)})")
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(key, str) and isinstance(value, str) for key, value in metadata.items())):
        raise TypeError(f"metadata must be a dict of strings to strings, got {metadata!r}")


@door(arrays_and_metadata_fit)
def save_safetensors(path, arrays, metadata=None):
    """Write {name: NumPy array} to the file `path` in the safetensors format (the `safetensors`
    package and Hugging Face `transformers` read it), with `metadata`, a dict of strings, under
    `__metadata__`. The names and arrays are checked before anything is written, and the file is
    written whole or not at all (`replaced_atomically`)."""
    with replaced_atomically(path, "save_safetensors") as file:
        write_safetensors(file, arrays, metadata or {})


def write_safetensors(file, arrays, metadata=None):
    """Write checked arrays and metadata to an open binary file, as `save_safetensors` does.

    The header is padded with spaces to a multiple of 8 bytes, and the tensors are laid out
    largest item size first, so each begins at a multiple of its item size: what a reader that
    maps the file into memory needs to view it as an array without copying.
    """
    order = sorted(arrays, key=lambda name: -arrays[name].itemsize)      # stable: ties keep order
    offsets, position = {}, 0
    for name in order:
        offsets[name] = [position, position + arrays[name].nbytes]
        position += arrays[name].nbytes
    header = {METADATA: metadata} if metadata else {}
    for name, array in arrays.items():
        header[name] = {"dtype": NAMES[array.dtype.newbyteorder("=")], "shape": list(array.shape),
                        "data_offsets": offsets[name]}
    header = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header += b" " * (-len(header) % 8)
    file.write(len(header).to_bytes(8, "little") + header)
    for name in order:
        little_endian = arrays[name].dtype.newbyteorder("<")
        file.write(arrays[name].astype(little_endian, copy=False).tobytes())


def opened_to_read(path, caller, what="file"):
    """open(path, "rb"), with the two errors a user meets said in a sentence: there is no such
    file, or the path is a folder (which open calls a bare IsADirectoryError)."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{caller}: {path!r} is a folder, not a {what}; name the file")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise FileNotFoundError(f"{caller}: there is no {what} {path!r}") from None


@contextlib.contextmanager
def replaced_atomically(path, caller):
    """`with replaced_atomically(path, "save") as file:` writes a file under a temporary name in
    the folder of `path`, renamed to `path` when the block ends: a write that fails leaves no
    half-written file, and an earlier file at `path` as it was."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{caller}: there is no folder {folder!r} to save {path!r} in")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{caller}: {path!r} is a folder; name a file to save in")
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as file:
            yield file
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
