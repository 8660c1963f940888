"""kube's CEL url, ip/cidr and format libraries: expressions and results (and runtime errors)
from k8s.io/apiserver/pkg/cel/library's ip_test.go, cidr_test.go and format_test.go, and Go's
url.ParseRequestURI rules for url()."""

from __future__ import annotations

import logging

import pytest

from controlplane.apis.apiextensions import cel

LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
    "and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
    "'[a-z]([-a-z0-9]*[a-z0-9])?')"
)
QUALIFIED = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
FORMATS = [
    "dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
    "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte", "date", "datetime",
]


def _run(expression: str) -> object:
    assert cel.compile_error(expression) is None
    return cel.execute(cel.compiled(expression), cel.activation({}))


def _error(expression: str) -> str:
    with pytest.raises(cel.EvaluationError) as raised:
        _run(expression)
    return str(raised.value)


TRUE = [
    # urls
    "url('https://kubernetes.io/').getScheme() == 'https'",
    "url('https://kubernetes.io:80/docs').getHost() == 'kubernetes.io:80'",
    "url('https://[::1]:80/').getHost() == '[::1]:80' && url('https://[::1]:80/').getHostname() == '::1'",
    "url('https://[::1]:80/').getPort() == '80' && url('https://kubernetes.io/').getPort() == ''",
    "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
    "url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'",
    "url('https://example.com/?k=v&k=v2&x').getQuery() == {'k': ['v', 'v2'], 'x': ['']}",
    "url('https://example.com/p?a=1#frag').getQuery() == {'a': ['1']}",
    "url('https://example.com/p#frag').getEscapedPath() == '/p'",
    "url('/absolute-path').getScheme() == '' && url('/absolute-path').getHost() == ''",
    "url('https://USER@Example.com/').getHostname() == 'Example.com' && url('HTTPS://a/').getScheme() == 'https'",
    "isURL('https://kubernetes.io:80/') && isURL('/p') && isURL('mailto:a@b.c')",
    "!isURL('../relative-path') && !isURL('') && !isURL('https://a b/') && !isURL('https://h:x/')",
    "url('https://kubernetes.io/') == url('https://kubernetes.io/')",
    # ips
    "ip('192.168.0.1').family() == 4 && ip('2001:db8::68').family() == 6",
    "isIP('192.168.0.1') && !isIP('192.168.0.1.0') && isIP('2001:db8::68') && !isIP('2001:db8:::68')",
    "!isIP('::ffff:192.168.0.1') && !isIP('fe80::1%eth0') && !isIP('192.168.000.1')",
    "ip.isCanonical('127.0.0.1') && ip.isCanonical('2001:db8::68') && !ip.isCanonical('2001:DB8::68')",
    "!ip.isCanonical('2001:db8:0:0:0:0:0:68')",
    "ip('0.0.0.0').isUnspecified() && !ip('127.0.0.1').isUnspecified() && ip('::').isUnspecified()",
    "ip('127.0.0.1').isLoopback() && !ip('1.2.3.4').isLoopback() && ip('::1').isLoopback()",
    "ip('224.0.0.1').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()",
    "ip('ff02::1').isLinkLocalMulticast() && !ip('fd00::1').isLinkLocalMulticast()",
    "ip('169.254.169.254').isLinkLocalUnicast() && !ip('192.168.0.1').isLinkLocalUnicast()",
    "ip('fe80::1').isLinkLocalUnicast() && !ip('fd80::1').isLinkLocalUnicast()",
    "ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()",
    "ip('2001:db8::abcd').isGlobalUnicast() && !ip('ff00::1').isGlobalUnicast()",
    "ip('::1') == ip('0:0::1') && ip('2001:DB8::68') == ip('2001:db8::68')",
    # cidrs
    "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1')) && !cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
    "cidr('192.168.0.0/24').containsIP('192.168.0.1') && !cidr('192.168.0.0/24').containsIP('192.168.1.1')",
    "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25')) && !cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))",
    "cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25') && !cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')",
    "cidr('192.168.0.0/24').ip() == ip('192.168.0.0') && cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
    "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24') && cidr('192.168.0.0/24').prefixLength() == 24",
    "cidr('2001:db8::/32').containsIP(ip('2001:db8::1')) && !cidr('2001:db8::/32').containsIP('2001:dc8::1')",
    "cidr('2001:db8::/32').containsCIDR('2001:db8::/33') && !cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/31'))",
    "cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32') && cidr('2001:db8::/32').prefixLength() == 32",
    "!cidr('0.0.0.0/0').containsIP('::1') && !cidr('::/0').containsCIDR('10.0.0.0/8')",
    "cidr('192.168.0.1/24') != cidr('192.168.0.0/24')",
    "string(ip('192.168.0.1')) == '192.168.0.1' && string(ip('2001:DB8:0::68')) == '2001:db8::68'",
    "string(cidr('192.168.0.0/24')) == '192.168.0.0/24' && string(cidr('10.1.2.3/8')) == '10.1.2.3/8'",
    "string(1) == '1' && string('x') == 'x'",
    "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0/08')",
    "!isCIDR('::ffff:10.0.0.0/104') && !isCIDR('fe80::%eth0/64')",
    # formats
    "format.dns1123Label().validate('my-label-name') == optional.none()",
    "format.dns1123Subdomain().validate('apiextensions.k8s.io') == optional.none()",
    "format.qualifiedName().validate('apiextensions.k8s.io/v1beta1') == optional.none()",
    "format.dns1123LabelPrefix().validate('my-label-prefix-') == optional.none()",
    "format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-') == optional.none()",
    "format.dns1035LabelPrefix().validate('my-label-prefix-') == optional.none()",
    "format.uri().validate('http://example.com') == optional.none()",
    "format.uuid().validate('123e4567-e89b-12d3-a456-426614174000') == optional.none()",
    "format.byte().validate('aGVsbG8=') == optional.none()",
    "format.date().validate('2021-01-01') == optional.none()",
    "format.datetime().validate('2021-01-01T00:00:00Z') == optional.none()",
    "format.labelValue().validate('my-cool-label-Value') == optional.none()",
    "!format.named('unknown').hasValue()",
    "format.byte().validate('aGVsbG8').value() == ['invalid base64']",
    "format.date().validate('2020-01-32').value() == ['invalid date']",
    "format.datetime().validate('2020-01-32T00:00:00Z').value() == ['invalid datetime']",
    "format.uuid().validate('x').value() == ['does not match the UUID format']",
    "format.uri().validate('../x').value() == ['parse \"../x\": invalid URI for request']",
    "format.named('dns1123Label').value().validate('Abc').hasValue()",
]


@pytest.mark.parametrize("expression", TRUE)
def test_library_expressions_hold(expression: str) -> None:
    assert _run(expression) is True


@pytest.mark.parametrize(
    ("expression", "messages"),
    [
        ("format.dns1123Label().validate('contains a space')", [LABEL]),
        ("format.dns1123Subdomain().validate('contains a space')", [SUBDOMAIN]),
        ("format.dns1035Label().validate('contains a space')", [DNS1035]),
        ("format.qualifiedName().validate('contains a space')", [QUALIFIED]),
        ("format.dns1123LabelPrefix().validate('contains a space-')", [LABEL]),
        ("format.dns1123SubdomainPrefix().validate('contains a space-')", [SUBDOMAIN]),
        ("format.dns1035LabelPrefix().validate('contains a space-')", [DNS1035]),
        ("format.labelValue().validate('my-cool-label-Value!!\\n\\n!!!')", [LABEL_VALUE]),
    ],
)
def test_format_validate_gives_kubes_messages(expression: str, messages: list[str]) -> None:
    assert _run(f"{expression}.value()") == messages


def test_every_format_is_named_and_equals_only_itself() -> None:
    for name in FORMATS:
        assert _run(f"format.named('{name}').value() == format.{name}()") is True
        others = [other for other in FORMATS if other != name]
        assert _run(" || ".join(f"format.{name}() == format.{other}()" for other in others)) is False


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("ip('192.168.0.1.0')", 'IP Address "192.168.0.1.0" parse error during conversion from string: '
                                'ParseAddr("192.168.0.1.0"): IPv4 address too long'),
        ("ip.isCanonical('127.0.0.1.0')", 'IP Address "127.0.0.1.0" parse error during conversion from string: '
                                          'ParseAddr("127.0.0.1.0"): IPv4 address too long'),
        ("ip('2001:db8:::68')", 'IP Address "2001:db8:::68" parse error during conversion from string: '
                                'ParseAddr("2001:db8:::68"): each colon-separated field must have at least one digit (at ":68")'),
        ("ip('1.2.3')", 'IP Address "1.2.3" parse error during conversion from string: ParseAddr("1.2.3"): IPv4 address too short'),
        ("ip('1.2.3.256')", 'IP Address "1.2.3.256" parse error during conversion from string: '
                            'ParseAddr("1.2.3.256"): IPv4 field has value >255'),
        ("ip('01.2.3.4')", 'IP Address "01.2.3.4" parse error during conversion from string: '
                           'ParseAddr("01.2.3.4"): IPv4 field has octet with leading zero'),
        ("ip('1.2..4')", 'IP Address "1.2..4" parse error during conversion from string: '
                         'ParseAddr("1.2..4"): IPv4 field must have at least one digit (at ".4")'),
        ("ip('host')", 'IP Address "host" parse error during conversion from string: ParseAddr("host"): unable to parse IP'),
        ("ip('1::2::3')", 'IP Address "1::2::3" parse error during conversion from string: '
                          'ParseAddr("1::2::3"): multiple :: in address (at ":3")'),
        ("ip('1:2:3')", 'IP Address "1:2:3" parse error during conversion from string: ParseAddr("1:2:3"): address string too short'),
        ("ip('::ffff:192.168.0.1')", 'IPv4-mapped IPv6 address "::ffff:192.168.0.1" is not allowed'),
        ("ip('fe80::1%eth0')", 'IP address "fe80::1%eth0" with zone value is not allowed'),
        ("cidr('192.168.0.0/')", 'network address parse error during conversion from string: network address parse error '
                                 'during conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits after slash: ""'),
        ("cidr('2001:db8::/')", 'network address parse error during conversion from string: network address parse error '
                                'during conversion from string: netip.ParsePrefix("2001:db8::/"): bad bits after slash: ""'),
        ("cidr('10.0.0.0/33')", 'network address parse error during conversion from string: network address parse error '
                                'during conversion from string: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range'),
        ("cidr('10.0.0.0')", 'network address parse error during conversion from string: network address parse error '
                             'during conversion from string: netip.ParsePrefix("10.0.0.0"): no \'/\''),
        ("cidr('::ffff:10.0.0.0/104')", 'network address parse error during conversion from string: '
                                        'IPv4-mapped IPv6 address "::ffff:10.0.0.0/104" is not allowed'),
        ("cidr('192.168.0.0/24').containsIP('nope')", 'IP Address "nope" parse error during conversion from string: '
                                                      'ParseAddr("nope"): unable to parse IP'),
        ("url('../relative-path')", 'URL parse error during conversion from string: parse "../relative-path": invalid URI for request'),
        ("url('')", 'URL parse error during conversion from string: parse "": empty url'),
        ("url(':foo')", 'URL parse error during conversion from string: parse ":foo": missing protocol scheme'),
        ("url('https://example.com:port/')", 'URL parse error during conversion from string: '
                                             'parse "https://example.com:port/": invalid port ":port" after host'),
        ("url('https://a b/')", 'URL parse error during conversion from string: parse "https://a b/": invalid character " " in host name'),
        ("url('https://[::1/')", 'URL parse error during conversion from string: parse "https://[::1/": missing \']\' in host'),
        ("url('/a%zzb')", 'URL parse error during conversion from string: parse "/a%zzb": invalid URL escape "%zz"'),
    ],
)
def test_library_errors_are_kubes(expression: str, message: str) -> None:
    assert _error(expression) == message


def test_a_failing_library_call_leaves_no_log_line_with_the_users_value(caplog: pytest.LogCaptureFixture) -> None:
    """The evaluator's own warning for a library function that raised names the value (maybe a
    user's secret): the rule's error answers the user; the server's log keeps nothing of it."""
    with caplog.at_level(logging.DEBUG):
        assert "s3cret-value" in _error("ip('s3cret-value').family() == 4")
    assert not [r for r in caplog.records if "s3cret-value" in r.getMessage()]
