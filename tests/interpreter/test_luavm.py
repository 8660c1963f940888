"""The Lua sandbox customization scripts run in: what is reachable, the budgets, conversions,
and the ``kube`` library."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.interpreter.kubelib import KUBE_LIBRARY, requirements_from_karmada
from controlplane.interpreter.luavm import LuaScriptError, call_function, check_script


def run(script: str, *args: Any, results: int = 1, **limits: int) -> list[Any]:
    return call_function(script, "F", args, KUBE_LIBRARY, results=results, **limits)


@pytest.mark.parametrize(
    "body",
    [
        "return io.open('/etc/passwd')",
        "return os.execute('true')",
        "return debug.getinfo(1)",
        "return package.loaded",
        "return load('return 1')()",
        "return dofile('/etc/passwd')",
        "return loadfile('/etc/passwd')",
        "return python.eval('1')",
        "return coroutine.create(function() end)",
    ],
)
def test_the_sandbox_has_no_io_os_load_or_debug(body: str) -> None:
    with pytest.raises(LuaScriptError, match="nil value"):
        run(f"function F() {body} end")


def test_require_answers_only_kube() -> None:
    assert run("function F() local kube = require('kube'); return kube.resourceAdd('1', '500m') end") == ["1500m"]
    with pytest.raises(LuaScriptError, match="module 'os' is not available"):
        run("function F() return require('os') end")


def test_python_objects_expose_no_attributes() -> None:
    with pytest.raises(LuaScriptError, match="not reachable"):
        run("function F() local kube = require('kube'); return kube.resourceAdd.__globals__ end")


def test_an_endless_loop_is_stopped() -> None:
    with pytest.raises(LuaScriptError, match="instruction limit exceeded"):
        run("function F() while true do end end", instructions=100_000)


@pytest.mark.parametrize("call", ["pcall(spin)", "xpcall(spin, function(m) return m end)"])
def test_pcall_does_not_swallow_the_budget(call: str) -> None:
    with pytest.raises(LuaScriptError, match="instruction limit exceeded"):
        run(f"function F() local function spin() while true do end end while true do {call} end end", instructions=100_000)
    assert run("function F() return pcall(error, 'boom') end", results=2) == [False, "boom"]


def test_no_finalizers() -> None:
    with pytest.raises(LuaScriptError, match="__gc metamethods are not available"):
        run("function F() setmetatable({}, {__gc = function() while true do end end}) end")
    assert run("function F() return setmetatable({}, {__index = {a = 1}}).a end") == [1]


def test_memory_is_bounded() -> None:
    with pytest.raises(LuaScriptError, match="memory limit exceeded"):
        run("function F() local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1024) .. i end end", memory=4 << 20)


def test_a_runtime_error_says_which_function_and_line() -> None:
    with pytest.raises(LuaScriptError, match=r"F failed: script:2: attempt to index a nil value \(field 'spec'\)"):
        run("function F(obj)\n  return obj.spec.replicas\nend", {})


def test_compile_errors_and_missing_functions() -> None:
    with pytest.raises(LuaScriptError, match="does not compile"):
        check_script("function F(", "F", KUBE_LIBRARY)
    with pytest.raises(LuaScriptError, match="does not define function GetReplicas"):
        check_script("function Other() end", "GetReplicas", KUBE_LIBRARY)
    check_script("function GetReplicas(obj) return 1, nil end", "GetReplicas", KUBE_LIBRARY)


def test_globals_do_not_leak_between_calls() -> None:
    script = "function F() counter = (counter or 0) + 1; return counter end"
    assert run(script) == [1]
    assert run(script) == [1]


def test_inputs_are_fresh_copies() -> None:
    obj = {"spec": {"replicas": 2}}
    assert run("function F(o) o.spec.replicas = 5; return o end", obj) == [{"spec": {"replicas": 5}}]
    assert obj == {"spec": {"replicas": 2}}


def test_conversions_follow_karmada_luavm() -> None:
    obj = {
        "spec": {
            "replicas": 3,
            "ratio": 0.5,
            "containers": [{"name": "a", "args": []}, {"name": "b"}],
            "labels": {},
            "absent": None,
            "on": True,
        }
    }
    script = """
    function F(o)
      assert(o.spec.absent == nil)
      assert(#o.spec.containers == 2 and o.spec.containers[1].name == "a")
      o.spec.count = #o.spec.containers * 1.0
      return o
    end
    """
    [out] = run(script, obj)
    spec = out["spec"]
    assert spec["containers"] == [{"name": "a", "args": []}, {"name": "b"}]  # arrays, empty ones kept as []
    assert spec["labels"] == {}  # an empty object stays an object
    assert "absent" not in spec
    assert spec["count"] == 2 and isinstance(spec["count"], int)  # integral numbers come back as ints
    assert spec["ratio"] == 0.5 and spec["on"] is True and spec["replicas"] == 3


def test_several_results_and_missing_ones() -> None:
    assert run("function F() return 4 end", results=2) == [4, None]


def test_kube_library() -> None:
    template = {
        "spec": {
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "high",
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}}, "envFrom": [{"configMapRef": {"name": "cfg"}}]},
            ],
            "volumes": [{"name": "s", "secret": {"secretName": "token"}}],
        }
    }
    script = """
    function F(t)
      local kube = require("kube")
      return kube.accuratePodRequirements(t), kube.getPodDependencies(t, "team"), kube.getResourceQuantity("1500m")
    end
    """
    req, deps, quantity = run(script, template, results=3)
    assert req["resourceRequest"]["nvidia.com/gpu"] == "2"
    assert req["resourceRequest"]["cpu"] == "1500m"
    assert req["nodeClaim"]["nodeSelector"] == {"pool": "gpu"}
    assert req["nodeClaim"]["tolerations"][0]["key"] == "gpu"
    assert req["priorityClassName"] == "high"
    parsed = requirements_from_karmada(req)
    assert parsed.gpu_resources == {"nvidia.com/gpu": 2}
    assert parsed.node_selector_map == {"pool": "gpu"}
    names = {(d["kind"], d["name"], d["namespace"]) for d in deps}
    assert ("ConfigMap", "cfg", "team") in names and ("Secret", "token", "team") in names
    assert quantity == 1.5


def test_a_kube_library_misuse_is_the_scripts_error() -> None:
    with pytest.raises(LuaScriptError, match="not a valid quantity"):
        run("function F() return require('kube').resourceAdd('lots', '1') end")


def test_a_backtracking_pattern_is_refused_before_it_runs() -> None:
    """The matcher is C code the instruction hook cannot stop: 'a-a-b' on 3,000 bytes takes
    about a minute, so it is refused; patterns scripts use on names and quantities still work."""
    with pytest.raises(LuaScriptError, match=r"pattern \"a-a-b\" is too costly on a subject of 3000 bytes"):
        run("function F() return string.find(string.rep('a', 3000), 'a-a-b') end")
    with pytest.raises(LuaScriptError, match="too costly"):
        run("function F() return (string.rep('a', 3000)):match('a*a*b') end")
    script = """
    function F()
      local n = 0
      for _ in string.gmatch("a b c", "%a+") do n = n + 1 end
      return {string.find("nvidia.com/gpu", "gpu", 1, true), ("abc-123"):match("^(%a+)-(%d+)"),
              (string.gsub("a.b.c", "%.", "/")), n}
    end
    """
    assert run(script) == [[12, "abc", "a/b/c", 3]]  # as Lua does: only the last call keeps all its results
