"""cel-go's strings extension as kube's CEL environments have it: ``format`` (expected outputs
and errors from cel-go's ext/formatting_test.go, default locale en_US) and the string functions'
edge cases and errors (ext/strings.go)."""

from __future__ import annotations

import pytest

from controlplane.apis.apiextensions import cel


def _run(expression: str) -> object:
    assert cel.compile_error(expression) is None
    return cel.execute(cel.compiled(expression), cel.activation({}))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('"no substitution".format([])', "no substitution"),
        ('"str is %s and some more".format(["filler"])', "str is filler and some more"),
        ('"%% and also %%".format([])', "% and also %"),
        ('"%%%s%%".format(["text"])', "%text%"),
        ('"%d %d %d, %s %s %s".format([1, 2, 3, "A", "B", "C"])', "1 2 3, A B C"),
        ('"%.3f".format([1.2345])', "1.234"),
        ('"%f".format([2.71828])', "2.718280"),
        ('"%.2f".format([1234567.891])', "1,234,567.89"),
        ('"%f".format(["NaN"]) + " " + "%f".format(["Infinity"]) + " " + "%f".format(["-Infinity"])', "NaN ∞ -∞"),
        ('"%.6e".format([1052.032911275])', "1.052033\u202f\u00d7\u202f10\u2070\u00b3"),
        ('"%e".format([2.71828])', "2.718280\u202f\u00d7\u202f10\u2070\u2070"),
        ('"%e".format([-0.000012345])', "-1.234500\u202f\u00d7\u202f10\u207b\u2070\u2075"),
        ('"this is 5 in binary: %b".format([5])', "this is 5 in binary: 101"),
        ('"%b %b %b".format([-5, uint(64), true])', "-101 1000000 1"),
        ('"%o %o %o".format([11, -11, uint(65535)])', "13 -13 177777"),
        ('"%x is 30 in hexadecimal, %X".format([30, -30])', "1e is 30 in hexadecimal, -1E"),
        ('"%x".format(["Hello world!"])', "48656c6c6f20776f726c6421"),
        ('"%X".format([b"byte string"])', "6279746520737472696E67"),
        ('"%s".format([2.71])', "2.71"),
        ('"%s".format([[2.71]])', "[2.710000]"),
        ('"%s".format([0.000000002])', "2e-09"),
        ('"%s".format([[0.000000002]])', "[0.000000]"),
        ('"%s %s %s".format([double("NaN"), double("Inf"), double("-Inf")])', "NaN +Inf -Inf"),
        ('"%s".format([[double("NaN"), double("+Inf"), double("-Inf")]])', '["NaN", "+Inf", "-Inf"]'),
        ('"null: %s, %s, %s".format([null, 999999999999, b"xyz"])', "null: null, 999999999999, xyz"),
        ('"true bool: %s, false bool: %s".format([true, false])', "true bool: true, false bool: false"),
        ('"type is %s".format([type("test string")])', "type is string"),
        ('"%s".format([timestamp("2023-02-03T23:31:20+00:00")])', "2023-02-03T23:31:20Z"),
        ('"%s".format([duration("1h45m47s")])', "6347s"),
        ('"%s".format([["abc", 3.14, null, [9, 8, 7, 6], timestamp("2023-02-03T23:31:20+00:00")]])',
         '["abc", 3.140000, null, [9, 8, 7, 6], timestamp("2023-02-03T23:31:20Z")]'),
        ('"%s".format([{"key1": b"xyz", "key5": null, "key2": duration("2h"), "key4": true, "key3": 2.71828}])',
         '{"key1":b"xyz", "key2":duration("7200s"), "key3":2.718280, "key4":true, "key5":null}'),
        ('"%s".format([{"strKey": "x", 6: duration("422s")}])', '{"strKey":"x", 6:duration("422s")}'),
    ],
)
def test_format_is_cel_gos(expression: str, expected: str) -> None:
    assert _run(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ('"%a".format([1])', 'could not parse formatting clause: unrecognized formatting clause "a"'),
        ('"double is %E".format([0.5])', 'could not parse formatting clause: unrecognized formatting clause "E"'),
        ('"%d %d %d".format([0, 1])', "index 2 out of range"),
        ('"filler %".format([1])', "unexpected end of string"),
        ('"double is %.34".format([5.0])',
         "could not parse formatting clause: error while parsing precision: could not find end of precision specifier"),
        ('"string is %b".format(["abc"])',
         "error during formatting: only integers and bools can be formatted as binary, was given string"),
        ('"%d".format([duration("30m2s")])',
         "error during formatting: decimal clause can only be used on integers, was given google.protobuf.Duration"),
        ('"octal: %o".format(["a string"])',
         "error during formatting: octal clause can only be used on integers, was given string"),
        ('"double is %x".format([0.5])',
         "error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given double"),
        ('"null: %f".format([null])',
         "error during formatting: fixed-point clause can only be used on doubles, was given null_type"),
        ('"null: %e".format([null])',
         "error during formatting: scientific clause can only be used on doubles, was given null_type"),
        ('"abc".charAt(4)', "index out of range: 4"),
        ('"abc".charAt(-1)', "index out of range: -1"),
        ('"abc".indexOf("a", -1)', "index out of range: -1"),
        ('"".lastIndexOf("a")', "index out of range: -1"),
        ('"abc".substring(4)', "index out of range: 4"),
        ('"abc".substring(2, 1)', "invalid substring range. start: 2, end: 1"),
        ('"abc".substring(1, 5)', "index out of range: 5"),
    ],
)
def test_string_errors_are_cel_gos(expression: str, message: str) -> None:
    with pytest.raises(cel.EvaluationError) as raised:
        _run(expression)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "expression",
    [
        '"abc".charAt(3) == "" && "héllo".charAt(1) == "é"',
        '"héllo".indexOf("l") == 2 && "abc".indexOf("c", 5) == -1 && "abc".indexOf("", 2) == 2',
        '"abcb".lastIndexOf("b") == 3 && "abcb".lastIndexOf("b", 2) == 1 && "abc".lastIndexOf("") == 3',
        '"tacocat".substring(4) == "cat" && "tacocat".substring(0, 4) == "taco" && "ÀÀb".substring(2) == "b"',
        # Go's unicode.IsSpace: a no-break space is space, the separator U+001C is not.
        '"\\u00a0 \\t trim \\n".trim() == "trim" && "\\u001c x".trim() == "\\u001c x"',
        '"TacoCÆt Xii".upperAscii() == "TACOCÆT XII" && "TacoCÆt".lowerAscii() == "tacocÆt"',
        '"hello hello hello".split(" ", 2) == ["hello", "hello hello"] && "a,b".split(",", 0) == []',
        '"abc".replace("", "-") == "-a-b-c-" && "aaa".replace("a", "b", 2) == "bba"',
        '["a", "b"].join() == "ab" && ["a", "b"].join(", ") == "a, b"',
        'strings.quote("a\\"b\\n\\t") == "\\"a\\\\\\"b\\\\n\\\\t\\""',
        '"abc".reverse() == "cba"',
    ],
)
def test_string_functions_hold(expression: str) -> None:
    assert _run(expression) is True


def test_a_strings_size_in_a_crd_rule_counts_code_points() -> None:
    """cel-go's ``size`` of a string counts its code points (the evaluator's counts bytes): a
    field, a list's item, a map's key and the root's name, typed strings by their schema."""
    schema = {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.size() <= 3"}],
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "s": {
                        "type": "string",
                        "x-kubernetes-validations": [{"rule": "self.size() <= 5"}, {"rule": "size(self) <= 5"}],
                    },
                    "l": {
                        "type": "array",
                        "items": {"type": "string"},
                        "x-kubernetes-validations": [{"rule": "self.all(x, x.size() <= 2) && self.size() < 3"}],
                    },
                    "m": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "x-kubernetes-validations": [{"rule": "self.all(k, k.size() <= 2)"}],
                    },
                },
            }
        },
    }
    rules = cel.compile_schema_rules(schema)
    fits = {"metadata": {"name": "héé"}, "spec": {"s": "héllo", "l": ["é", "ab"], "m": {"éé": "x"}}}
    assert rules.evaluate(fits, None) == []
    longer = {"metadata": {"name": "héé1"}, "spec": {"s": "héllo!", "l": ["éab"], "m": {"éé1": "x"}}}
    assert [(e.field, e.message.split(": failed rule: ")[1]) for e in rules.evaluate(longer, None)] == [
        ("<nil>", "self.metadata.name.size() <= 3"),
        ("spec.s", "self.size() <= 5"),
        ("spec.s", "size(self) <= 5"),
        ("spec.l", "self.all(x, x.size() <= 2) && self.size() < 3"),
        ("spec.m", "self.all(k, k.size() <= 2)"),
    ]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("string(true)", "true"),
        ("string(duration('1h'))", "3600s"),
        ("string(duration('1.5s'))", "1.5s"),
        ("string(timestamp('2024-01-01T00:00:00Z'))", "2024-01-01T00:00:00Z"),
        ("string(1.0)", "1"),
        ("string(1234567.0)", "1.234567e+06"),
        ("string(7u)", "7"),
        ("string(b'abc')", "abc"),
        ("string(ip('10.0.0.1')) + ' ' + string(cidr('10.0.0.0/8'))", "10.0.0.1 10.0.0.0/8"),
        ("[1, 2].map(x, string(x)).join(',')", "1,2"),
    ],
)
def test_string_converts_as_cel_go_does(expression: str, expected: str) -> None:
    """cel-go's ``string()``: a bool (the evaluator had no such conversion), a duration in seconds,
    a timestamp in RFC 3339 with ``Z``, a double in Go's shortest form."""
    assert _run(expression) == expected


def test_string_of_bytes_that_are_not_utf8_fails() -> None:
    with pytest.raises(cel.EvaluationError, match="invalid UTF-8 in bytes, cannot convert to string"):
        _run("string(b'\\xff')")


def test_an_optional_old_selfs_size_counts_code_points_too() -> None:
    rule = "!oldSelf.hasValue() || oldSelf.value().size() <= self.size()"
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "x-kubernetes-validations": [{"rule": rule, "optionalOldSelf": True}]}
        },
    }
    rules = cel.compile_schema_rules(schema)
    assert rules.evaluate({"s": "abc"}, {"s": "éé"}) == []
    assert len(rules.evaluate({"s": "ab"}, {"s": "ééé"})) == 1
