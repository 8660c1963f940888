"""kube's CEL url, ip/cidr and format libraries in a CRD's ``x-kubernetes-validations``, through
the hub's API: a custom resource is refused with the rule's message, or with the library's own
error when a value cannot be parsed, as kube-apiserver answers."""

from __future__ import annotations

from typing import Any

from tests.apiserver.test_crd_status_writes import STATUS, TRAINERS, Client, _crd, _serve, _trainer, api

__all__ = ["api"]


def _string(rule: str, message: str) -> dict[str, Any]:
    return {"type": "string", "x-kubernetes-validations": [{"rule": rule, "message": message}]}


SPEC = {
    "type": "object",
    "properties": {
        "endpoint": _string("url(self).getScheme() == 'https' && url(self).getPort() != '80'", "endpoint must be https, not on port 80"),
        "nodeIP": _string("ip(self).family() == 4 && !ip(self).isLoopback()", "nodeIP must be a non-loopback IPv4 address"),
        "podCIDR": _string("cidr(self).prefixLength() <= 24 && cidr(self) == cidr(self).masked()", "podCIDR must be a masked /24 or wider"),
        "prefix": _string("!format.dns1123LabelPrefix().validate(self).hasValue()", "prefix must be a DNS label prefix"),
    },
    "x-kubernetes-validations": [
        {"rule": "!has(self.nodeIP) || !has(self.podCIDR) || cidr(self.podCIDR).containsIP(self.nodeIP)",
         "messageExpression": "'nodeIP ' + self.nodeIP + ' is outside ' + string(self.podCIDR)"},
        {"rule": "!has(self.prefix) || format.named('dns1123Label').value().validate(self.prefix + 'x') == optional.none()"},
    ],
}
GOOD = {"endpoint": "https://trainer.example.com:8443/v1?debug=1", "nodeIP": "10.1.2.3", "podCIDR": "10.1.0.0/16", "prefix": "job-"}


async def _refusal(api: Client, spec: dict[str, Any]) -> str:
    refused = await api.post(TRAINERS, json=_trainer("bad", {**GOOD, **spec}))
    assert refused.status == 422, await refused.text()
    body = await refused.json()
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    return str(body["message"])


async def test_rules_using_the_url_ip_cidr_and_format_libraries(api: Client) -> None:
    await _serve(api, _crd(SPEC, STATUS), refused=_trainer("probe", {"endpoint": "http://a/"}))
    created = await api.post(TRAINERS, json=_trainer("good", GOOD))
    assert created.status == 201, await created.text()

    assert "spec.endpoint: Invalid value: \"string\": endpoint must be https, not on port 80" in await _refusal(
        api, {"endpoint": "https://trainer.example.com:80/"})
    assert ('spec.endpoint: Invalid value: "string": URL parse error during conversion from string: '
            'parse "trainer.example.com/v1": invalid URI for request') in await _refusal(api, {"endpoint": "trainer.example.com/v1"})
    assert "spec.nodeIP: Invalid value: \"string\": nodeIP must be a non-loopback IPv4 address" in await _refusal(
        api, {"nodeIP": "127.0.0.1", "podCIDR": "127.0.0.0/8"})
    assert ('spec.nodeIP: Invalid value: "string": IPv4-mapped IPv6 address "::ffff:10.1.2.3" is not allowed'
            in await _refusal(api, {"nodeIP": "::ffff:10.1.2.3"}))
    assert 'spec: Invalid value: "object": nodeIP 10.2.0.1 is outside 10.1.0.0/16' in await _refusal(api, {"nodeIP": "10.2.0.1"})
    assert "spec.podCIDR: Invalid value: \"string\": podCIDR must be a masked /24 or wider" in await _refusal(
        api, {"podCIDR": "10.1.0.1/16"})
    assert "spec.prefix: Invalid value: \"string\": prefix must be a DNS label prefix" in await _refusal(api, {"prefix": "Job-"})
    assert ("spec: Invalid value: \"object\": failed rule: !has(self.prefix) || format.named('dns1123Label')"
            in await _refusal(api, {"prefix": "a" * 63}))
