"""The frame codec writes protobuf's own bytes for a Frame and reads any valid Frame; bad bytes are refused."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synclab.wire import pb
from synclab.wire.codec import MalformedFrame, WireFrame, decode_frame, encode_frame, frame_for

headers = st.builds(
    pb.FrameHeader, kind=st.integers(0, 7), key=st.text(max_size=40), slice=st.integers(0, 2**32 - 1),
    iteration=st.integers(0, 2**64 - 1), priority=st.integers(-(2**31), 2**31 - 1), offset=st.integers(0, 2**40),
    total_bytes=st.integers(0, 2**40), dtype=st.integers(0, 7), shape=st.lists(st.integers(0, 2**40), max_size=4),
    sender=st.text(max_size=20), tag=st.integers(0, 2**32 - 1))


@settings(max_examples=300, deadline=None)
@given(header=headers, payload=st.binary(max_size=3000))
def test_encoding_is_protobufs_own_and_reads_back(header, payload):
    ours = frame_for(header, memoryview(payload))
    reference = pb.Frame(header=header, payload=payload).SerializeToString()
    assert encode_frame(ours) == reference
    back = decode_frame(reference)
    assert back.header == header and bytes(back.payload) == payload
    assert bytes(ours.payload) == payload


def test_generated_frames_and_unencoded_wire_frames_are_encoded_too():
    h = pb.FrameHeader(kind=pb.GRADIENT, key="w", total_bytes=3)
    reference = pb.Frame(header=h, payload=b"abc").SerializeToString()
    assert encode_frame(pb.Frame(header=h, payload=b"abc")) == reference
    assert encode_frame(WireFrame(h, memoryview(b"abc"))) == reference


def test_the_payload_is_a_view_not_a_copy():
    data = pb.Frame(header=pb.FrameHeader(key="k"), payload=b"x" * 1000).SerializeToString()
    f = decode_frame(data)
    assert isinstance(f.payload, memoryview) and f.payload.obj is data


def test_other_layouts_go_through_protobuf():
    h = pb.FrameHeader(key="k", kind=pb.PARAMS)
    swapped = pb.Frame(payload=b"pp").SerializeToString() + pb.Frame(header=h).SerializeToString()  # payload first
    f = decode_frame(swapped)
    assert f.header == h and bytes(f.payload) == b"pp"
    unknown = pb.Frame(header=h, payload=b"pp").SerializeToString() + b"\x18\x05"  # field 3, varint: unknown
    assert bytes(decode_frame(unknown).payload) == b"pp"


@pytest.mark.parametrize("bad", [b"\x0a\x05ab", b"\x12\xff", b"\x0a\x02\xff\xff", b"\x12\x80\x80\x80\x80\x80\x80\x80"
                                 b"\x80\x80\x80\x01"])
def test_truncated_or_malformed_frames_are_refused(bad):
    with pytest.raises(MalformedFrame):
        decode_frame(bad)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_malformed(data):
    try:
        f = decode_frame(data)
    except MalformedFrame:
        return
    assert isinstance(f.header, pb.FrameHeader)
