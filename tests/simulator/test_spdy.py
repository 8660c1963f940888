"""SPDY/3.1 framing (pure) and the simulated pod's port-forward echo session."""

from __future__ import annotations

import struct
import zlib

import pytest

from controlplane.objectclient import errors
from simulator import spdy
from simulator.portforward import EchoSession, parse_ports

OPEN = {"port": ["8080"], "requestid": ["0"]}


def test_the_dictionary_is_spdy3s() -> None:
    # Its size and Adler-32 (the DICTID a zlib stream names) are fixed by the SPDY/3 draft.
    assert len(spdy.DICTIONARY) == 1423
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b",enq=0.")
    compressed = spdy.Encoder().encode(spdy.SynReply(1, {"a": ["b"]}))[12:]
    assert struct.unpack(">I", compressed[2:6])[0] == zlib.adler32(spdy.DICTIONARY)


def test_frames_survive_any_split_and_share_one_compression_context() -> None:
    frames: list[spdy.Frame] = [
        spdy.SynStream(1, {"streamtype": ["error"], **OPEN}),
        spdy.SynStream(3, {"streamtype": ["data"], **OPEN}, priority=2),
        spdy.Data(3, b"x" * 70_000),
        spdy.Data(3, b"", fin=True),
        spdy.SynReply(3, {}),
        spdy.HeadersFrame(3, {"k": ["v1", "v2"]}),
        spdy.RstStream(3, spdy.CANCEL),
        spdy.Settings(((0, 4, 100), (1, 7, 65536))),
        spdy.Ping(7),
        spdy.WindowUpdate(3, 1000),
        spdy.GoAway(3, 0),
    ]
    encoder = spdy.Encoder()
    wire = b"".join(encoder.encode(frame) for frame in frames)
    for size in (1, 7, 4096):
        decoder = spdy.Decoder()
        got = [frame for start in range(0, len(wire), size) for frame in decoder.feed(wire[start:start + size])]
        assert got == frames


def test_bounds_and_protocol_errors() -> None:
    with pytest.raises(spdy.SpdyError, match="longer than"):
        spdy.Decoder().feed(struct.pack(">II", 1, spdy.MAX_FRAME_BYTES + 1))
    with pytest.raises(spdy.SpdyError, match="version 2"):
        spdy.Decoder().feed(struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\x00\x00\x00\x01")
    with pytest.raises(spdy.SpdyError, match="inflates past"):
        spdy.Decoder().feed(spdy.Encoder().encode(spdy.SynReply(1, {"big": ["x" * (spdy.MAX_HEADER_BYTES + 1)]})))
    with pytest.raises(spdy.SpdyError, match="does not inflate"):
        spdy.Decoder().feed(struct.pack(">HHII", 0x8003, spdy.SYN_REPLY, 8, 1) + b"junk")
    with pytest.raises(spdy.SpdyError, match="too short"):
        spdy.Decoder().feed(struct.pack(">HHI", 0x8003, spdy.RST_STREAM, 2) + b"\x00\x01")


def test_an_echo_session_answers_a_forwarded_connection_as_kubelet_does() -> None:
    session = EchoSession("p")
    assert session.handle(spdy.SynStream(1, {"streamtype": ["error"], **OPEN})) == [spdy.SynReply(1)]
    assert session.handle(spdy.Data(1, b"", fin=True)) == []  # kubectl closes its error stream's side
    assert session.handle(spdy.SynStream(3, {"streamtype": ["data"], **OPEN})) == [spdy.SynReply(3)]
    assert session.handle(spdy.Data(3, b"hi")) == [spdy.Data(3, b"hi")]
    # The client's end of the data stream ends the pair: FIN on data, then on error (no message).
    assert session.handle(spdy.Data(3, b"!", fin=True)) == [
        spdy.Data(3, b"!"), spdy.Data(3, b"", fin=True), spdy.Data(1, b"", fin=True),
    ]
    assert not session.streams and not session.error_streams
    assert session.handle(spdy.Ping(5)) == [spdy.Ping(5)]
    assert session.handle(spdy.Ping(6)) == []  # a server's ping is not echoed back


def test_a_bad_port_or_stream_is_refused() -> None:
    session = EchoSession("p")
    session.handle(spdy.SynStream(1, {"streamtype": ["error"], "port": ["x"], "requestid": ["4"]}))
    answer = session.handle(spdy.SynStream(3, {"streamtype": ["data"], "port": ["x"], "requestid": ["4"]}))
    assert answer[:2] == [spdy.SynReply(3), spdy.Data(3, b"", fin=True)]
    assert answer[2] == spdy.Data(1, b'invalid port header "x": it must be a number from 1 to 65535', fin=True)
    assert session.handle(spdy.SynStream(5, {"streamtype": ["other"]})) == [spdy.RstStream(5, spdy.REFUSED_STREAM)]
    session.handle(spdy.SynStream(7, {"streamtype": ["data"], **OPEN}))
    assert session.handle(spdy.SynStream(7, {"streamtype": ["data"], **OPEN})) == [
        spdy.RstStream(7, spdy.PROTOCOL_ERROR)
    ]
    session.handle(spdy.RstStream(7, spdy.CANCEL))
    assert session.handle(spdy.Data(7, b"late")) == []
    session.handle(spdy.GoAway(0))
    assert session.closed


def test_ports_are_kubes_query() -> None:
    assert parse_ports(["8080,9000", "7"]) == [8080, 9000, 7]
    for bad in ([], ["0"], ["x"], ["70000"], [""]):
        with pytest.raises(errors.BadRequest):
            parse_ports(bad)
