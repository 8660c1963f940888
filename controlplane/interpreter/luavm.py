"""A sandboxed Lua runtime for Karmada's ResourceInterpreterCustomization scripts.

Each call runs in a fresh Lua 5.4 state (lupa) so no script sees another call's globals:
only the base, ``string``, ``table``, ``math`` and ``utf8`` libraries are reachable (no ``io``,
``os``, ``debug``, ``package``, ``load``, ``dofile``…), ``require`` answers only ``"kube"``,
Python objects expose no attributes, an instruction budget stops endless loops and lupa's
``max_memory`` bounds the state's allocations; Lua patterns (matched in C, where the hook
cannot stop them) are refused when their backtracking could cost more than ``_PATTERN_BUDGET``. Inputs are converted afresh into Lua tables
(JSON arrays become 1-indexed sequences, ``None`` becomes ``nil``) and results back into
JSON-compatible values as Karmada's luavm does (a sequence becomes a list, integral numbers
become ints, an empty table becomes ``[]`` where the input held a list there and ``{}``
otherwise).

Every failure — a script that does not compile, a missing function, a runtime error, the
instruction or memory budget spent — is a :class:`LuaScriptError` with a readable message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import lupa.lua54 as lua54

__all__ = [
    "DEFAULT_INSTRUCTION_LIMIT",
    "DEFAULT_MEMORY_LIMIT",
    "LuaScriptError",
    "call_function",
    "check_script",
]

#: Lua VM instructions one call may run before it is stopped.
DEFAULT_INSTRUCTION_LIMIT = 5_000_000
#: Bytes one call's Lua state may allocate.
DEFAULT_MEMORY_LIMIT = 32 * 1024 * 1024
#: Deepest input or output nesting converted (hostile or cyclic tables stop here).
MAX_DEPTH = 64

_HOOK_EVERY = 1000
#: Largest (subject length + 1) ** (quantifiers + 1) a Lua pattern may be matched with: the
#: matcher is C code the instruction hook cannot stop, and backtracks polynomially.
_PATTERN_BUDGET = 10**8
_SANDBOX = """
local budget, every, kube, pattern_budget = ...
local steps = 0
local spent = "instruction limit exceeded (" .. budget .. " instructions): the script runs too long"
debug.sethook(function()
  steps = steps + every
  if steps > budget then error(spent, 0) end
end, "", every)
-- pcall/xpcall must not swallow the budget's error: once spent, it goes on up.
local pcall_, xpcall_, pack, unpack = pcall, xpcall, table.pack, table.unpack
local function passed(results)
  if steps > budget then error(spent, 0) end
  return unpack(results, 1, results.n)
end
pcall = function(...) return passed(pack(pcall_(...))) end
xpcall = function(...) return passed(pack(xpcall_(...))) end
-- Finalizers would run when the state closes, after the call: objects get none.
local setmetatable_, rawget_ = setmetatable, rawget
setmetatable = function(t, mt)
  if type(mt) == "table" and rawget_(mt, "__gc") ~= nil then error("__gc metamethods are not available", 2) end
  return setmetatable_(t, mt)
end
for _, name in ipairs({"io", "os", "debug", "package", "load", "loadfile", "dofile", "loadstring",
                       "collectgarbage", "python", "coroutine", "rawset", "rawget", "rawequal"}) do
  _G[name] = nil
end
-- Lua's pattern matcher runs in C, out of the hook's reach, and backtracks: cost grows as the
-- subject's length to the power of the pattern's quantifiers (plus one unless anchored).
local sub, find, match, gmatch, gsub = string.sub, string.find, string.match, string.gmatch, string.gsub
local function check(s, pattern, anchorable)
  if type(s) == "number" then s = tostring(s) end
  if type(s) ~= "string" or type(pattern) ~= "string" then return end
  local quantifiers, i = 0, 1
  while i <= #pattern do
    local c = sub(pattern, i, i)
    if c == "%" then i = i + 2 else
      if c == "*" or c == "+" or c == "-" or c == "?" then quantifiers = quantifiers + 1 end
      i = i + 1
    end
  end
  local power = quantifiers + ((anchorable and sub(pattern, 1, 1) == "^") and 0 or 1)
  if (#s + 1) ^ power > pattern_budget then
    error("pattern " .. string.format("%q", sub(pattern, 1, 40)) .. " is too costly on a subject of " .. #s ..
          " bytes (" .. quantifiers .. " quantifiers): use plain find or a simpler pattern", 3)
  end
end
string.find = function(s, pattern, init, plain)
  if not plain then check(s, pattern, true) end
  return find(s, pattern, init, plain)
end
string.match = function(s, pattern, init) check(s, pattern, true); return match(s, pattern, init) end
string.gmatch = function(s, pattern) check(s, pattern, false); return gmatch(s, pattern) end
string.gsub = function(s, pattern, repl, n) check(s, pattern, true); return gsub(s, pattern, repl, n) end
_G.require = function(name)
  if name == "kube" then return kube end
  error("module '" .. tostring(name) .. "' is not available (only require(\\"kube\\") is)", 2)
end
"""

KubeLibrary = Mapping[str, Callable[..., Any]]


class LuaScriptError(Exception):
    """A customization script failed: compile error, missing function, runtime error or budget spent."""


def _deny_attributes(obj: Any, name: Any, is_setting: bool) -> Any:
    raise AttributeError("Python attributes are not reachable from interpreter scripts")


class _State:
    """One fresh sandboxed Lua state with ``kube`` installed."""

    def __init__(self, kube: KubeLibrary, instructions: int, memory: int) -> None:
        self.lua = lua54.LuaRuntime(
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            attribute_filter=_deny_attributes,
            max_memory=memory,
        )
        library = self.lua.table_from({name: self._wrap(fn) for name, fn in kube.items()})
        self.lua.execute(_SANDBOX, instructions, _HOOK_EVERY, library, _PATTERN_BUDGET)

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            try:
                result = fn(*(to_python(a) for a in args))
            except Exception as exc:  # a kube library misuse is the script's runtime error
                raise LuaScriptError(str(exc)) from exc
            return self.to_lua(result)

        return call

    def to_lua(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise LuaScriptError(f"object nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            return self.lua.table_from(
                {str(k): self.to_lua(v, depth + 1) for k, v in value.items() if v is not None}
            )
        if isinstance(value, list | tuple):
            return self.lua.table_from([self.to_lua(v, depth + 1) for v in value])
        return value


def _is_table(value: Any) -> bool:
    return bool(lua54.lua_type(value) == "table")


def to_python(value: Any, like: Any = None, depth: int = 0) -> Any:
    """A Lua value as JSON-compatible Python; ``like`` (the input at the same place) decides
    whether an empty table is ``[]`` or ``{}``."""
    if depth > MAX_DEPTH:
        raise LuaScriptError(f"result nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if not _is_table(value):
        if lua54.lua_type(value) is not None:
            raise LuaScriptError(f"a {lua54.lua_type(value)} cannot be converted to JSON")
        return value
    items = list(value.items())
    if not items:
        return [] if isinstance(like, list) else {}
    keys = [k for k, _ in items]
    if all(isinstance(k, int) and not isinstance(k, bool) for k in keys) and sorted(keys) == list(
        range(1, len(keys) + 1)
    ):
        sample = like if isinstance(like, list) else []
        return [
            to_python(v, sample[k - 1] if k - 1 < len(sample) else None, depth + 1) for k, v in sorted(items)
        ]
    hints = like if isinstance(like, Mapping) else {}
    return {str(k): to_python(v, hints.get(str(k)), depth + 1) for k, v in items}


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, lua54.LuaMemoryError):
        return "memory limit exceeded: the script allocates too much"
    return text.replace('[string "<python>"]', "script") or type(exc).__name__


def _load(state: _State, script: str, function: str) -> Any:
    try:
        state.lua.execute(script)
    except lua54.LuaSyntaxError as exc:
        raise LuaScriptError(f"the script does not compile: {_describe(exc)}") from exc
    except (lua54.LuaError, LuaScriptError) as exc:
        raise LuaScriptError(f"loading the script failed: {_describe(exc)}") from exc
    fn = state.lua.globals()[function]
    if lua54.lua_type(fn) != "function":
        raise LuaScriptError(f"the script does not define function {function}")
    return fn


def check_script(script: str, function: str, kube: KubeLibrary) -> None:
    """Raise :class:`LuaScriptError` unless ``script`` compiles, loads and defines ``function``."""
    state = _State(kube, DEFAULT_INSTRUCTION_LIMIT, DEFAULT_MEMORY_LIMIT)
    _load(state, script, function)


def call_function(
    script: str,
    function: str,
    args: tuple[Any, ...],
    kube: KubeLibrary,
    *,
    instructions: int = DEFAULT_INSTRUCTION_LIMIT,
    memory: int = DEFAULT_MEMORY_LIMIT,
    results: int = 1,
) -> list[Any]:
    """Run ``function`` of ``script`` on fresh copies of ``args``; its first ``results`` return
    values as JSON-compatible Python (missing ones are None). Each result is converted with the
    matching argument as the shape hint (Karmada's scripts return their edited input)."""
    try:
        state = _State(kube, instructions, memory)
        fn = _load(state, script, function)
        out = fn(*(state.to_lua(a) for a in args))
    except LuaScriptError:
        raise
    except lua54.LuaMemoryError as exc:
        raise LuaScriptError(_describe(exc)) from exc
    except lua54.LuaError as exc:
        raise LuaScriptError(f"{function} failed: {_describe(exc)}") from exc
    except MemoryError as exc:
        raise LuaScriptError("memory limit exceeded: the script allocates too much") from exc
    except (AttributeError, TypeError, ValueError) as exc:  # raised by lupa inside the script
        raise LuaScriptError(f"{function} failed: {exc}") from exc
    values = list(out) if isinstance(out, tuple) else [out]
    values += [None] * (results - len(values))
    hints = list(args) + [None] * results
    return [to_python(v, hints[i]) for i, v in enumerate(values[:results])]
