"""Go's ``encoding/json`` syntax errors, word for word: what ``json.Unmarshal`` says of text that is
not one JSON value (its scanner in src/encoding/json/scanner.go), and of a value of another type
than the Go one it decodes into. The expected texts are what Go prints for the same input."""

from __future__ import annotations

import pytest

from controlplane.gojson import GoJSONError, cannot_unmarshal, quote_char, scan, syntax_error


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "unexpected end of JSON input"),
        (b" \t\r\n", "unexpected end of JSON input"),
        (b"x", "invalid character 'x' looking for beginning of value"),
        (b"{bad json", "invalid character 'b' looking for beginning of object key string"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        (b'{"a":}', "invalid character '}' looking for beginning of value"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"[1,]", "invalid character ']' looking for beginning of value"),
        (b"{} {}", "invalid character '{' after top-level value"),
        (b'"ab\x01c"', "invalid character '\\x01' in string literal"),
        (b'"tab\there"', "invalid character '\\t' in string literal"),
        (b'"\\x"', "invalid character 'x' in string escape code"),
        (b'"\\u12G4"', "invalid character 'G' in \\u hexadecimal character escape"),
        (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
        (b"nul!", "invalid character '!' in literal null (expecting 'l')"),
        (b"fals", "invalid character ' ' in literal false (expecting 'e')"),
        (b"-", "invalid character ' ' in numeric literal"),
        (b"-a", "invalid character 'a' in numeric literal"),
        (b"1.", "invalid character ' ' after decimal point in numeric literal"),
        (b"1.e5", "invalid character 'e' after decimal point in numeric literal"),
        (b"1e+", "invalid character ' ' in exponent of numeric literal"),
        (b"01", "invalid character '1' after top-level value"),
        (b"NaN", "invalid character 'N' looking for beginning of value"),
        (b"'single'", "invalid character '\\'' looking for beginning of value"),
        (b'{"a":"b"', "unexpected end of JSON input"),
        (b'{"a":"b', "unexpected end of JSON input"),
        (b"[", "unexpected end of JSON input"),
        (b"\xff\xfe", "invalid character 'ÿ' looking for beginning of value"),
        (b"\x80", "invalid character '\\u0080' looking for beginning of value"),
        (b"\x00", "invalid character '\\x00' looking for beginning of value"),
        (b"[" * 10001, "invalid character '[' exceeded max depth"),
    ],
)
def test_text_that_is_not_json_gets_gos_syntax_error(data: bytes, message: str) -> None:
    assert syntax_error(data) == message
    with pytest.raises(GoJSONError) as caught:
        scan(data)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "data",
    [b"{}", b" [1, 2.5e-3, -0, true, false, null] ", b'{"a":{"b":["\\u00e9\\n"]}}', b'"\xff invalid UTF-8 is text"',
     b"[" * 10000 + b"]" * 10000],
)
def test_one_json_value_has_no_syntax_error(data: bytes) -> None:
    assert syntax_error(data) is None


def test_scan_finds_the_top_level_value_and_an_objects_members() -> None:
    data = b' {"a": 1, "b" : [2, {"c": 3}]} '
    top, members = scan(data)
    assert data[top[0]:top[1]].rstrip() == data.strip()
    assert members is not None
    assert [(data[k[0]:k[1]], data[v[0]:v[1]]) for k, v in members] == [(b'"a"', b"1"), (b'"b"', b'[2, {"c": 3}]')]
    assert scan(b"[1]")[1] is None


@pytest.mark.parametrize(
    ("byte", "quoted"), [(ord("a"), "'a'"), (ord("'"), "'\\''"), (ord('"'), "'\"'"), (ord("\\"), "'\\\\'"),
                         (0x0A, "'\\n'"), (0x7F, "'\\x7f'"), (0xA0, "'\\u00a0'"), (0xAD, "'\\u00ad'"), (0xE9, "'é'")],
)
def test_a_byte_is_quoted_as_gos_quote_char(byte: int, quoted: str) -> None:
    assert quote_char(byte) == quoted


@pytest.mark.parametrize(
    ("value", "word"), [([1], "array"), ({}, "object"), ("x", "string"), (1, "number"), (1.5, "number"), (True, "bool")],
)
def test_a_value_of_the_wrong_type_is_gos_unmarshal_type_error(value: object, word: str) -> None:
    assert cannot_unmarshal(value, "map[string]interface {}") == (
        f"json: cannot unmarshal {word} into Go value of type map[string]interface {{}}"
    )
