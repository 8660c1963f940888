"""Go's ``json.Unmarshal`` into a map, as kube uses it to check a registry Secret's config:
what it refuses and its words for each refusal."""

from __future__ import annotations

import pytest

from controlplane.apis.kube.gojson import MAX_DEPTH, map_unmarshal_error

MAP = "map[string]interface {}"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b'{"auths": {"r.io": {"auth": "dTpw"}}}', None),
        (b" null ", None),
        (b"{}", None),
        (b"notjson", "invalid character 'o' in literal null (expecting 'u')"),
        (b"", "unexpected end of JSON input"),
        (b'{"auths": {', "unexpected end of JSON input"),
        (b"[1]", f"json: cannot unmarshal array into Go value of type {MAP}"),
        (b'"x"', f"json: cannot unmarshal string into Go value of type {MAP}"),
        (b"-1.5e3", f"json: cannot unmarshal number into Go value of type {MAP}"),
        (b"false", f"json: cannot unmarshal bool into Go value of type {MAP}"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a": 1 "b": 2}', "invalid character '\"' after object key:value pair"),
        (b'{"a": 1,}', "invalid character '}' looking for beginning of object key string"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b'{"a": 1} x', "invalid character 'x' after top-level value"),
        (b"1.", "invalid character ' ' after decimal point in numeric literal"),  # the end is read as a space
        (b"1e+", "invalid character ' ' in exponent of numeric literal"),
        (b"-x", "invalid character 'x' in numeric literal"),
        (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
        (b'"\\q"', "invalid character 'q' in string escape code"),
        (b'"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"),
        (b'"a\nb"', "invalid character '\\n' in string literal"),
        (b"'a'", "invalid character '\\'' looking for beginning of value"),
        (b"\x00", "invalid character '\\x00' looking for beginning of value"),
        (b"\xc3\xa9", "invalid character '\u00c3' looking for beginning of value"),
        (b"\xa0", "invalid character '\\u00a0' looking for beginning of value"),  # not printable: escaped
        (b"NaN", "invalid character 'N' looking for beginning of value"),
    ],
)
def test_unmarshal_into_a_map_fails_in_gos_words(data: bytes, error: str | None) -> None:
    assert map_unmarshal_error(data) == error


def test_nesting_is_bounded_as_gos_scanner_bounds_it() -> None:
    assert map_unmarshal_error(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) == f"json: cannot unmarshal array into Go value of type {MAP}"
    assert map_unmarshal_error(b"[" * (MAX_DEPTH + 1)) == "exceeded max depth"
