"""dgemm.jit.entry: one verified blob per entry; corruption, wrong keys and bad HMACs rejected."""
import pytest

from dgemm.heuristics import select
from dgemm.jit import entry as entry_format
from dgemm.jit.errors import EntryError

KEY = "ab" * 32
OTHER_KEY = "cd" * 32


@pytest.fixture
def sample():
    return entry_format.Entry(
        key=KEY, spec=entry_format.canonical_spec(select("fp8_gemm_nt", 64, 2112, 7168)),
        compiler="nvrtc 13.0",
        flags=("--gpu-architecture=sm_90a", "-std=c++17"), symbol="_Z6kernelv",
        cubin=bytes(range(256)) * 40, created=1700000000.5, compile_seconds=1.25)


def test_an_entry_round_trips_through_its_blob(sample):
    assert entry_format.unpack(entry_format.pack(sample), KEY) == sample


def test_a_signed_entry_round_trips_with_its_secret(sample):
    blob = entry_format.pack(sample, b"secret")
    assert entry_format.unpack(blob, KEY, b"secret") == sample


def test_the_blob_is_not_a_pickle(sample):
    assert entry_format.pack(sample).startswith(entry_format.MAGIC)


def test_an_entry_for_another_key_is_rejected(sample):
    with pytest.raises(EntryError, match=f"for key {KEY}; expected {OTHER_KEY}"):
        entry_format.unpack(entry_format.pack(sample), OTHER_KEY)


@pytest.mark.parametrize("cut", [1, 32, 100, 5000])
def test_a_truncated_entry_is_rejected(sample, cut):
    blob = entry_format.pack(sample)
    with pytest.raises(EntryError):
        entry_format.unpack(blob[:-cut], KEY)


@pytest.mark.parametrize("where", ["prefix", "header", "cubin", "checksum"])
def test_a_flipped_bit_anywhere_is_rejected(sample, where):
    blob = bytearray(entry_format.pack(sample))
    offsets = {"prefix": 9, "header": 40, "cubin": len(blob) - 500, "checksum": len(blob) - 1}
    blob[offsets[where]] ^= 0x04
    with pytest.raises(EntryError):
        entry_format.unpack(bytes(blob), KEY)


def test_an_unsigned_entry_is_rejected_when_a_secret_is_set(sample):
    with pytest.raises(EntryError, match="unsigned"):
        entry_format.unpack(entry_format.pack(sample), KEY, b"secret")


def test_an_entry_signed_with_another_secret_is_rejected(sample):
    blob = entry_format.pack(sample, b"their secret")
    with pytest.raises(EntryError, match="HMAC"):
        entry_format.unpack(blob, KEY, b"our secret")


def test_a_signed_entry_is_accepted_on_its_checksum_without_a_secret(sample):
    assert entry_format.unpack(entry_format.pack(sample, b"secret"), KEY) == sample


def test_a_re_signed_tampered_cubin_is_still_caught_by_the_hmac(sample):
    import dataclasses
    forged = entry_format.pack(dataclasses.replace(sample, cubin=b"evil" * 10), b"guess")
    with pytest.raises(EntryError, match="HMAC"):
        entry_format.unpack(forged, KEY, b"secret")


def test_read_header_exposes_the_metadata_without_the_cubin(sample):
    header = entry_format.read_header(entry_format.pack(sample))
    assert (header["key"], header["size"], header["symbol"]) == (KEY, 10240, "_Z6kernelv")


def test_the_spec_is_kept_as_the_specs_canonical_json(sample):
    spec = select("fp8_gemm_nt", 64, 2112, 7168)
    unpacked = entry_format.unpack(entry_format.pack(sample), KEY)
    assert unpacked.spec == spec.to_json() and unpacked.spec_fields["arch"] == "sm_90a"


def test_an_unpacked_entry_holds_the_blob_it_was_verified_from(sample):
    blob = entry_format.pack(sample, b"secret")
    assert entry_format.unpack(blob, KEY, b"secret").blob == blob


def test_sealing_packs_the_entry_and_keeps_the_blob(sample):
    sealed = entry_format.seal(sample, b"secret")
    assert sealed == sample and sealed.blob == entry_format.pack(sample, b"secret")


def test_describe_reads_spec_arch_and_compiler_from_the_header(sample):
    described = entry_format.describe(entry_format.pack(sample))
    assert (described["arch"], described["compiler"]) == ("sm_90a", "nvrtc 13.0")
