"""Go's ``base64.StdEncoding.DecodeString``, which is how kube's decoder reads a ``[]byte`` field.

A Secret's ``data`` and a ConfigMap's ``binaryData`` are ``map[string][]byte`` in Go; their
JSON values are padded standard base64, and a value Go cannot decode fails the whole request
with Go's own words: ``illegal base64 data at input byte 4``. The offset is Go's: the byte
where decoding stopped (line breaks are skipped, not refused; padding must be complete; nothing
may follow it). Python's decoder accepts and refuses different inputs and names no offset.

Pure: text in, bytes out or :class:`CorruptInput`.
"""

from __future__ import annotations

import base64

_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_NEWLINES = frozenset(b"\r\n")
_PAD = ord("=")


class CorruptInput(ValueError):
    """Go's ``base64.CorruptInputError``: the offset of the first byte it could not take."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


def _skip_newlines(src: bytes, si: int) -> int:
    while si < len(src) and src[si] in _NEWLINES:
        si += 1
    return si


def _quantum(src: bytes, si: int) -> tuple[int, bytes, bool]:
    """One group of up to four symbols from ``si`` (Go's ``decodeQuantum``): the next offset,
    the symbols read, and whether padding ended the input. Raises :class:`CorruptInput`."""
    symbols = bytearray()
    while len(symbols) < 4:
        if si == len(src):
            if not symbols:
                return si, b"", True
            raise CorruptInput(si - len(symbols))  # a padded encoding takes no short group
        byte = src[si]
        si += 1
        if byte in _ALPHABET:
            symbols.append(byte)
            continue
        if byte in _NEWLINES:
            continue
        if byte != _PAD or len(symbols) < 2:
            raise CorruptInput(si - 1)
        if len(symbols) == 2:  # "==" expected; the first "=" is read
            si = _skip_newlines(src, si)
            if si == len(src):
                raise CorruptInput(len(src))
            if src[si] != _PAD:
                raise CorruptInput(si - 1)
            si += 1
        si = _skip_newlines(src, si)
        if si < len(src):
            raise CorruptInput(si)  # something after the padding
        return si, bytes(symbols), True
    return si, bytes(symbols), False


def std_decode(text: str) -> bytes:
    """``text`` decoded as Go's padded standard base64 does, or :class:`CorruptInput`."""
    src = text.encode()
    out = bytearray()
    si = 0
    while True:
        si, symbols, ended = _quantum(src, si)
        if symbols:
            padded = symbols + b"=" * (-len(symbols) % 4)
            out += base64.b64decode(padded)
        if ended:
            return bytes(out)
