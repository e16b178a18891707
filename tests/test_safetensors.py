"""safetensors with NumPy: round trips of every dtype and shape, every malformed file named (the
known kinds one by one, then whatever hypothesis draws: headers of any JSON, valid files with
bytes changed), and files exchanged with the `safetensors` package both ways (it is in the dev
extra)."""
import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies

import tinyattn as ta
from tinyattn.safetensors import DTYPES, write_safetensors

DTYPE_NAMES = sorted(DTYPES)
SHAPES = [(), (0,), (5,), (2, 3), (3, 0, 2), (2, 1, 3, 2)]


def random_array(dtype, shape, seed=0):
    """Values that use the dtype's whole range (extremes included), or random floats."""
    generator = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == bool:
        return np.asarray(generator.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = generator.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        values.flat[:2] = [info.min, info.max][:values.size]
        return values
    values = generator.standard_normal(shape) * 1e3
    if dtype.kind == "c":
        values = values + 1j * generator.standard_normal(shape)
    return np.asarray(values, dtype)


def every_dtype_and_shape():
    return {f"{name} {shape}": random_array(DTYPES[name], shape, seed)
            for seed, (name, shape) in enumerate((name, shape) for name in DTYPE_NAMES
                                                 for shape in SHAPES)}


def assert_same_arrays(got, expected):
    assert list(got) == list(expected)
    for name, array in expected.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        np.testing.assert_array_equal(got[name], array, err_msg=name)


def test_every_dtype_and_shape_round_trips_in_order_with_metadata(tmp_path):
    arrays = every_dtype_and_shape()
    ta.save_safetensors(tmp_path / "all.safetensors", arrays, metadata={"format": "np", "é": "ü"})
    got, metadata = ta.load_safetensors(tmp_path / "all.safetensors", with_metadata=True)
    assert_same_arrays(got, arrays)
    assert metadata == {"format": "np", "é": "ü"}
    assert ta.load_safetensors(str(tmp_path / "all.safetensors")).keys() == arrays.keys()
    assert all(array.flags.writeable for array in got.values())


def test_big_endian_and_non_contiguous_arrays_are_written_little_endian(tmp_path):
    values = np.arange(12.0).reshape(3, 4)
    arrays = {"big": values.astype(">f4"), "transposed": values.T, "strided": values[:, ::2]}
    ta.save_safetensors(tmp_path / "f", arrays)
    got = ta.load_safetensors(tmp_path / "f")
    assert got["big"].dtype == np.dtype("<f4") and got["transposed"].shape == (4, 3)
    for name, array in arrays.items():
        np.testing.assert_array_equal(got[name], array)
    data = (tmp_path / "f").read_bytes()
    start = 8 + int.from_bytes(data[:8], "little")
    header = json.loads(data[8:start])
    begin, end = header["big"]["data_offsets"]
    assert data[start + begin:start + end] == values.astype("<f4").tobytes()


def test_the_layout_is_aligned_largest_item_first(tmp_path):
    arrays = {"byte": np.ones(3, np.uint8), "double": np.ones(3), "half": np.ones(1, np.float16),
              "int": np.ones(2, np.int32)}
    ta.save_safetensors(tmp_path / "f", arrays)
    data = (tmp_path / "f").read_bytes()
    header_length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_length])
    assert header_length % 8 == 0 and list(header) == list(arrays)        # the caller's order
    begins = {name: entry["data_offsets"][0] for name, entry in header.items()}
    assert sorted(begins, key=begins.get) == ["double", "int", "half", "byte"]
    assert all(begins[name] % arrays[name].itemsize == 0 for name in arrays)
    for length in range(1, 9):          # names of 8 lengths: JSON of every length modulo 8
        ta.save_safetensors(tmp_path / "f", {"a" * length: np.ones(1)})
        data = (tmp_path / "f").read_bytes()
        header_length = int.from_bytes(data[:8], "little")
        header = data[8:8 + header_length]
        assert header_length % 8 == 0 and len(header) - len(header.rstrip(b" ")) < 8


def raw_file(header, data=b""):
    """The bytes of a safetensors file with this header (a dict, or bytes as they are)."""
    header = header if isinstance(header, bytes) else json.dumps(header).encode()
    return len(header).to_bytes(8, "little") + header + data


def entry(shape, offsets, dtype="F32"):
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


def test_bf16_is_widened_to_float32_exactly(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 65280.0, -0.0, np.inf, 2.0 ** -126], np.float32)
    bits = values.view("<u4")
    assert np.all(bits & 0xFFFF == 0)                # each value is a bfloat16: low half zero
    (tmp_path / "bf16").write_bytes(raw_file({"x": entry([7], [0, 14], "BF16")},
                                             (bits >> 16).astype("<u2").tobytes()))
    got = ta.load_safetensors(tmp_path / "bf16")["x"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view("<u4"), bits)


F = entry
MALFORMED = {
    "empty": (b"", "it has 0 bytes, fewer than the 8 of the header length"),
    "short": (b"abc", "it has 3 bytes, fewer than the 8"),
    "header past the end": ((1000).to_bytes(8, "little") + b"{}",
                            r"the header length, 1000 bytes, runs past the end of the file "
                            r"\(10 bytes\)"),
    "bad JSON": (raw_file(b"{not json"), r"the header is not valid JSON \(Expecting property"),
    "not UTF-8": (raw_file(b'{"\xff": 1}'), r"the header is not valid JSON \('utf-8' codec"),
    "not an object": (raw_file([1, 2]), "the header is a JSON list, not an object"),
    "missing field": (raw_file({"a": {"dtype": "F32", "shape": [1]}}, bytes(4)),
                      "tensor 'a' must have a dtype, a shape and data_offsets, got"),
    "entry not a dict": (raw_file({"a": [1]}), "tensor 'a' must have a dtype"),
    "negative size": (raw_file({"a": F([-1], [0, 4])}, bytes(4)),
                      r"tensor 'a' must have a shape of integers >= 0 .* got shape \[-1\]"),
    "float size": (raw_file({"a": F([1.0], [0, 4])}, bytes(4)),
                   r"tensor 'a' must have a shape .* got shape \[1.0\]"),
    "three offsets": (raw_file({"a": F([1], [0, 4, 4])}, bytes(4)),
                      r"tensor 'a' must .* data_offsets \[BEGIN, END\] with 0 <= BEGIN <= "
                      r"END, got .* \[0, 4, 4\]"),
    "offsets backwards": (raw_file({"a": F([0], [4, 0])}, bytes(4)),
                          r"tensor 'a' must .* got .* \[4, 0\]"),
    "unknown dtype": (raw_file({"a": F([1], [0, 4], "F128")}, bytes(4)),
                      r"tensor 'a' has dtype 'F128', which tinyattn does not read \(it reads "
                      r"F64, F32, F16, I64"),
    "shape not matching bytes": (raw_file({"a": F([2, 3], [0, 4])}, bytes(4)),
                                 r"tensor 'a' of shape \(2, 3\) and dtype F32 takes 24 bytes, but "
                                 r"its data_offsets \[0, 4\] hold 4"),
    "overlap": (raw_file({"a": F([2], [0, 8]), "b": F([2], [4, 12])}, bytes(12)),
                r"tensor 'b' \(bytes 4 to 12 of the data\) overlaps tensor 'a', which ends at "
                r"byte 8"),
    "gap": (raw_file({"a": F([1], [0, 4]), "b": F([1], [8, 12])}, bytes(12)),
            "bytes 4 to 8 of the data belong to no tensor"),
    "past the data": (raw_file({"a": F([2], [0, 8])}, bytes(4)),
                      r"tensor 'a' ends at byte 8 of the data, past its end \(the data has 4 "
                      r"bytes\)"),
    "trailing bytes": (raw_file({"a": F([1], [0, 4])}, bytes(8)),
                       "bytes 4 to 8 of the data belong to no tensor"),
    "metadata not strings": (raw_file({"__metadata__": {"k": 1}}),
                             r"__metadata__ must map strings to strings, got \{'k': 1\}"),
    "metadata not a dict": (raw_file({"__metadata__": [1]}), "__metadata__ must map strings"),
}
ALSO_ACCEPTED_BY_SAFETENSORS = {
    # the package keeps the last of two tensors of the same name; tinyattn will not guess
    "repeated name": (raw_file(b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
                               b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
                               bytes(4)), r"the header names \['a'\] more than once"),
}


@pytest.mark.parametrize("case", [*MALFORMED, *ALSO_ACCEPTED_BY_SAFETENSORS])
def test_a_malformed_file_is_named_with_what_is_wrong(tmp_path, case):
    content, reason = {**MALFORMED, **ALSO_ACCEPTED_BY_SAFETENSORS}[case]
    (tmp_path / "bad.safetensors").write_bytes(content)
    with pytest.raises(ValueError, match=rf"^load_safetensors: '.*bad.safetensors' is not a "
                                         rf"safetensors file: {reason}"):
        ta.load_safetensors(tmp_path / "bad.safetensors")


@pytest.mark.parametrize("case", MALFORMED)
def test_the_safetensors_package_refuses_the_same_files(tmp_path, case):
    safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="a test-only reference")
    (tmp_path / "bad.safetensors").write_bytes(MALFORMED[case][0])
    with pytest.raises(Exception, match="Error while deserializing header"):
        safetensors_numpy.load_file(tmp_path / "bad.safetensors")


def test_a_missing_file_a_folder_and_a_dtype_without_numpy_equivalent(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"load_safetensors: there is no file '.*nothing'"):
        ta.load_safetensors(tmp_path / "nothing")
    with pytest.raises(IsADirectoryError, match=r"load_safetensors: '.*' is a folder, not a file"):
        ta.load_safetensors(tmp_path)
    with pytest.raises(IsADirectoryError, match=r"save_safetensors: '.*' is a folder"):
        ta.save_safetensors(tmp_path, {"a": np.zeros(2)})
    (tmp_path / "f8").write_bytes(raw_file({"a": F([4], [0, 4], "F8_E4M3")}, bytes(4)))
    with pytest.raises(ValueError, match="tensor 'a' has dtype 'F8_E4M3', which tinyattn does "
                                         "not read"):
        ta.load_safetensors(tmp_path / "f8")


@pytest.mark.parametrize("arrays, metadata, error, message", [
    ([np.zeros(1)], None, TypeError, "expected a dict of arrays, got list"),
    ({1: np.zeros(1)}, None, TypeError, "tensor names must be strings, got 1"),
    ({"__metadata__": np.zeros(1)}, None, ValueError,
     "'__metadata__' is the name of the metadata"),
    ({"a": [1.0, 2.0]}, None, TypeError, "'a' is a list, not a NumPy array"),
    ({"a": np.zeros(1, np.complex128)}, None, TypeError,
     r"'a' has dtype complex128, which the format does not have \(it has float64, float32"),
    ({"a": np.array(["text"])}, None, TypeError, "'a' has dtype <U4, which the format"),
    ({"a": np.array([None])}, None, TypeError, "'a' has dtype object"),
    ({"a": np.zeros(1)}, {"k": 1}, TypeError, r"metadata must be a dict of strings to strings, "
                                              r"got \{'k': 1\}"),
    ({"a": np.zeros(1)}, [("k", "v")], TypeError, "metadata must be a dict"),
])
def test_what_cannot_be_written_is_refused_before_any_file(tmp_path, arrays, metadata, error,
                                                           message):
    with pytest.raises(error, match=f"^save_safetensors: {message}"):
        ta.save_safetensors(tmp_path / "f", arrays, metadata)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_earlier_file(tmp_path, monkeypatch):
    ta.save_safetensors(tmp_path / "f", {"a": np.ones(2)})
    before = (tmp_path / "f").read_bytes()

    def replace_that_fails(source, destination):
        raise OSError("disk full")
    monkeypatch.setattr("os.replace", replace_that_fails)
    with pytest.raises(OSError, match="disk full"):
        ta.save_safetensors(tmp_path / "f", {"a": np.zeros(2)})
    assert (tmp_path / "f").read_bytes() == before and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(FileNotFoundError, match="save_safetensors: there is no folder"):
        ta.save_safetensors(tmp_path / "missing" / "f", {"a": np.ones(2)})


def test_the_safetensors_package_reads_what_tinyattn_writes(tmp_path):
    safetensors = pytest.importorskip("safetensors", reason="a test-only reference")
    import safetensors.numpy
    arrays = every_dtype_and_shape()
    ta.save_safetensors(tmp_path / "ours", arrays, metadata={"written by": "tinyattn"})
    got = safetensors.numpy.load_file(tmp_path / "ours")
    assert_same_arrays({name: got[name] for name in arrays}, arrays)
    with safetensors.safe_open(tmp_path / "ours", framework="numpy") as file:
        assert file.metadata() == {"written by": "tinyattn"}


def test_tinyattn_reads_what_the_safetensors_package_writes(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="a test-only reference")
    arrays = every_dtype_and_shape()
    safetensors_numpy.save_file(arrays, tmp_path / "theirs", metadata={"written by": "them"})
    got, metadata = ta.load_safetensors(tmp_path / "theirs", with_metadata=True)
    assert_same_arrays({name: got[name] for name in arrays}, arrays)
    assert metadata == {"written by": "them"}


NESTED_TOO_DEEP = {
    "arrays in a tensor": b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "objects in the metadata": b'{"__metadata__": ' + b'{"k": ' * 100_000 + b'"v"'
                               + b"}" * 100_000 + b"}",
}


@pytest.mark.parametrize("case", NESTED_TOO_DEEP)
def test_a_header_nested_too_deeply_is_named_not_a_recursion_error(tmp_path, case):
    (tmp_path / "deep.safetensors").write_bytes(raw_file(NESTED_TOO_DEEP[case]))
    with pytest.raises(ValueError, match=r"^load_safetensors: '.*deep.safetensors' is not a "
                                         r"safetensors file: the header nests JSON arrays or "
                                         r"objects too deeply to be read \(a safetensors header "
                                         r"nests them 3 deep\)$"):
        ta.load_safetensors(tmp_path / "deep.safetensors")


def test_a_shape_numpy_cannot_hold_and_an_integer_of_many_digits_are_named(tmp_path):
    cases = {
        "too many axes": (raw_file({"a": F([0] * 70, [0, 0])}),
                          r"tensor 'a' has a shape of 70 axes, which NumPy cannot hold"),
        "an axis too long": (raw_file({"a": F([0, 2 ** 64], [0, 0])}),
                             r"tensor 'a' has a shape of 2 axes, which NumPy cannot hold"),
        "5,000 digits": (raw_file(b'{"a": {"dtype": "F32", "shape": [' + b"1" * 5000
                                  + b'], "data_offsets": [0, 4]}}', bytes(4)),
                         r"the header holds an integer of 5000 digits: sizes and offsets are "
                         r"64-bit \(at most 20 digits\)$"),
    }
    for content, reason in cases.values():
        (tmp_path / "bad.safetensors").write_bytes(content)
        with pytest.raises(ValueError, match=rf"^load_safetensors: '.*bad.safetensors' is not a "
                                             rf"safetensors file: {reason}"):
            ta.load_safetensors(tmp_path / "bad.safetensors")


def loads_or_names_the_file(path):
    """Assert that load_safetensors(path) either reads arrays or raises one ValueError that names
    the file and fits on a line."""
    try:
        arrays = ta.load_safetensors(path)
    except ValueError as error:
        message = str(error)
        assert message.startswith(f"load_safetensors: {str(path)!r} is not a safetensors file: ")
        assert "\n" not in message and len(message) < 1000, message
    else:
        assert all(isinstance(array, np.ndarray) for array in arrays.values())


JSON_VALUES = strategies.recursive(
    strategies.none() | strategies.booleans() | strategies.integers() | strategies.floats()
    | strategies.text(max_size=60),
    lambda children: strategies.lists(children, max_size=6)
    | strategies.dictionaries(strategies.text(max_size=5), children, max_size=6),
    max_leaves=12)
SIZES = strategies.integers(-2, 20) | strategies.integers(-2 ** 65, 2 ** 70)
ENTRIES = strategies.fixed_dictionaries({
    "dtype": strategies.sampled_from(["F32", "F64", "BF16", "U8", "BOOL", "F128"]) | JSON_VALUES,
    "shape": strategies.lists(SIZES, max_size=8) | JSON_VALUES,
    "data_offsets": strategies.lists(SIZES, max_size=3) | JSON_VALUES})
HEADERS = strategies.dictionaries(strategies.text(max_size=60), ENTRIES | JSON_VALUES,
                                  max_size=4)


@pytest.fixture(scope="module")
def scratch_file(tmp_path_factory):
    """One file that each example of a hypothesis test writes over."""
    return tmp_path_factory.mktemp("drawn") / "drawn.safetensors"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header=HEADERS, data=strategies.binary(max_size=64))
def test_any_header_hypothesis_draws_is_read_or_named(scratch_file, header, data):
    scratch_file.write_bytes(raw_file(header, data))
    loads_or_names_the_file(scratch_file)


@settings(max_examples=50, deadline=None)
@given(depth=strategies.integers(0, 100_000), kind=strategies.sampled_from([b"[", b'{"k": ']),
       where=strategies.sampled_from(["shape", "dtype", "__metadata__", "name"]))
def test_a_header_nested_to_any_depth_is_read_or_named(scratch_file, depth, kind, where):
    close = b"]" if kind == b"[" else b"}"
    nested = kind * depth + b"1" + close * depth
    header = {"a": F([1], [0, 4]), "__metadata__": {"k": "v"}}
    placeholder = b'"NESTED"'
    if where == "name":
        header["b"] = "NESTED"
    elif where == "__metadata__":
        header["__metadata__"]["k"] = "NESTED"
    else:
        header["a"][where] = "NESTED"
    scratch_file.write_bytes(raw_file(json.dumps(header).encode().replace(placeholder, nested),
                                      bytes(4)))
    loads_or_names_the_file(scratch_file)


VALID_FILE = io.BytesIO()
write_safetensors(VALID_FILE, {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
                               "b": np.ones(3, np.uint8), "c": np.zeros((0, 4))}, {"k": "v"})


@settings(max_examples=300, deadline=None)
@given(edits=strategies.lists(strategies.tuples(strategies.sampled_from(["set", "cut", "insert"]),
                                                strategies.integers(0, len(VALID_FILE.getvalue())),
                                                strategies.binary(min_size=1, max_size=8)),
                              min_size=1, max_size=4))
def test_any_valid_file_with_bytes_changed_cut_or_inserted_is_read_or_named(scratch_file, edits):
    content = bytearray(VALID_FILE.getvalue())
    for kind, position, some_bytes in edits:
        if kind == "set":
            content[position:position + len(some_bytes)] = some_bytes
        elif kind == "cut":
            del content[position:position + len(some_bytes)]
        else:
            content[position:position] = some_bytes
    scratch_file.write_bytes(bytes(content))
    loads_or_names_the_file(scratch_file)
