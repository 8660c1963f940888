"""A CEL expression's syntax tree, with the offset of each node as cel-go records it.

The evaluator (:mod:`.cel`) compiles and runs expressions but exposes no syntax tree; the
type checker (:mod:`.cel_types`) needs one. :func:`parse` reads CEL's grammar (literals,
identifiers, selection, indexing, calls, list and map literals, the unary, binary and
conditional operators with CEL's precedence) into :class:`Node` values. Each node's ``at`` is
where cel-go places it, so that messages point where kube's do: a selection at its ``.``, a
call at its ``(``, an index at its ``[``, an operator at its token, an identifier or literal
at its first character. Raises :class:`SyntaxError` on anything it cannot read (the caller
treats such an expression as not checkable: the evaluator already refused invalid ones).
:func:`plain` writes cel-go's optional syntax as calls the evaluator has. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<number>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)|0[xX][0-9a-fA-F]+[uU]?|\d+[uU]?)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|\.\?|\[\?|[-+*/%!<>?:.,()\[\]{}])
    """,
    re.X | re.S,
)
_RAW_STRING = re.compile(r"^[rR][bB]?|^[bB][rR]")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number, string, ident, op, end
    text: str
    at: int


@dataclass(slots=True)
class Node:
    """One node: ``kind`` is ``ident``, ``literal``, ``select``, ``call``, ``index``, ``list``
    or ``map``. A ``literal``'s ``name`` is its CEL type (``int``, ``uint``, ``double``,
    ``string``, ``bytes``, ``bool``, ``null_type``); a ``select``'s the field (``optional``
    for ``.?``); a ``call``'s the function (``_==_`` for an operator, as cel-go names it)."""

    kind: str
    at: int
    name: str = ""
    target: Node | None = None
    args: list[Node] = field(default_factory=list)
    #: ``.?``/``[?`` on a ``select``/``index``.
    optional: bool = False
    #: A list literal's element or a map literal's key written with ``?`` before it.
    marked: bool = False
    #: Where the node's text starts and ends (parentheses around it included).
    start: int = 0
    end: int = 0


def tokens(text: str) -> list[Token]:
    out: list[Token] = []
    index = 0
    while index < len(text):
        match = _TOKEN.match(text, index)
        if match is None:
            raise SyntaxError(f"unexpected character at {index}")
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(Token(kind, match.group(), index))
        index = match.end()
    out.append(Token("end", "", len(text)))
    return out


_BINARY = (
    ("||",),
    ("&&",),
    ("==", "!=", "<", "<=", ">", ">=", "in"),
    ("+", "-"),
    ("*", "/", "%"),
)
_FUNCTION = {"in": "@in", "!": "!_"}


def operator_name(op: str) -> str:
    return _FUNCTION.get(op, f"_{op}_")


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokens(text)
        self.index = 0

    def spans(self, node: Node, start: int) -> Node:
        """``node``, its text from ``start`` to the end of the last token taken."""
        last = self.tokens[self.index - 1]
        node.start, node.end = start, last.at + len(last.text)
        return node

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept(self, text: str) -> Token | None:
        token = self.peek()
        if token.kind in ("op", "ident") and token.text == text:
            self.index += 1
            return token
        return None

    def expect(self, text: str) -> Token:
        token = self.accept(text)
        if token is None:
            raise SyntaxError(f"expected {text!r} at {self.peek().at}")
        return token

    def expression(self) -> Node:
        condition = self.binary(0)
        question = self.accept("?")
        if question is None:
            return condition
        yes = self.binary(0)
        self.expect(":")
        no = self.expression()
        return self.spans(Node("call", question.at, "_?_:_", args=[condition, yes, no]), condition.start)

    def binary(self, level: int) -> Node:
        if level == len(_BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while True:
            token = self.peek()
            if token.kind not in ("op", "ident") or token.text not in _BINARY[level]:
                return left
            self.take()
            right = self.binary(level + 1)
            left = self.spans(
                Node("call", token.at, operator_name(token.text), args=[left, right]), left.start
            )

    def unary(self) -> Node:
        token = self.peek()
        if token.kind == "op" and token.text in ("!", "-"):
            self.take()
            operand = self.unary()
            if (
                token.text == "-"
                and operand.kind == "literal"
                and operand.name in ("int", "double")
                and operand.at == token.at + 1
            ):
                return self.spans(
                    Node("literal", token.at, operand.name), token.at
                )  # a negative number is one literal
            return self.spans(
                Node("call", token.at, "!_" if token.text == "!" else "-_", args=[operand]), token.at
            )
        return self.member(self.primary())

    def arguments(self, close: str, *, optional: bool = False) -> list[Node]:
        """The expressions up to ``close``; ``optional``: each may be marked ``?`` (a list literal's
        optional element)."""
        args: list[Node] = []
        if self.accept(close) is not None:
            return args
        while True:
            marked = optional and self.accept("?") is not None
            args.append(self.expression())
            args[-1].marked = marked
            if self.accept(close) is not None:
                return args
            self.expect(",")
            if self.accept(close) is not None:  # a trailing comma
                return args

    def member(self, node: Node) -> Node:
        while True:
            token = self.peek()
            if token.kind != "op":
                return node
            if token.text in (".", ".?"):
                self.take()
                name = self.take()
                if name.kind != "ident":
                    raise SyntaxError(f"expected a field name at {name.at}")
                opened = self.accept("(") if token.text == "." else None
                if opened is not None:
                    call = Node("call", opened.at, name.text, target=node, args=self.arguments(")"))
                    node = self.spans(call, node.start)
                else:
                    select = Node("select", token.at, name.text, target=node, optional=token.text == ".?")
                    node = self.spans(select, node.start)
            elif token.text in ("[", "[?"):
                self.take()
                key = self.expression()
                self.expect("]")
                index = Node("index", token.at, target=node, args=[key], optional=token.text == "[?")
                node = self.spans(index, node.start)
            else:
                return node

    def primary(self) -> Node:
        start = self.peek().at
        return self.spans(self._primary(), start)

    def _primary(self) -> Node:
        token = self.take()
        if token.kind == "number":
            text = token.text.lower()
            if text.endswith("u"):
                return Node("literal", token.at, "uint")
            if not text.startswith("0x") and any(c in text for c in ".e"):
                return Node("literal", token.at, "double")
            return Node("literal", token.at, "int")
        if token.kind == "string":
            prefix = _RAW_STRING.match(token.text)
            letters = (prefix.group() if prefix else token.text[:1] if token.text[:1] in "bB" else "").lower()
            return Node("literal", token.at, "bytes" if "b" in letters else "string")
        if token.kind == "ident":
            if token.text in ("true", "false"):
                return Node("literal", token.at, "bool")
            if token.text == "null":
                return Node("literal", token.at, "null_type")
            opened = self.accept("(")
            if opened is not None:
                return Node("call", opened.at, token.text, args=self.arguments(")"))
            if self.peek().text == "{" and self.peek().kind == "op":
                raise SyntaxError("message construction is not checked")
            return Node("ident", token.at, token.text)
        if token.kind == "op" and token.text == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        if token.kind == "op" and token.text in ("[", "[?"):
            if token.text == "[?":  # a list literal whose first element is optional: ``[?x, y]``
                self.index -= 1
                self.tokens[self.index] = Token("op", "?", token.at + 1)
            return Node("list", token.at, args=self.arguments("]", optional=True))
        if token.kind == "op" and token.text == "{":
            return self.map_literal(token)
        if token.kind == "op" and token.text == ".":
            name = self.take()
            if name.kind != "ident":
                raise SyntaxError(f"expected a name at {name.at}")
            return Node("ident", name.at, name.text)
        raise SyntaxError(f"unexpected {token.text!r} at {token.at}")

    def map_literal(self, opened: Token) -> Node:
        entries: list[Node] = []
        while self.accept("}") is None:
            marked = self.accept("?") is not None
            entries.append(self.expression())
            entries[-1].marked = marked
            self.expect(":")
            entries.append(self.expression())
            if self.accept("}") is not None:
                break
            self.expect(",")
        return Node("map", opened.at, args=entries)


def parse(text: str) -> Node:
    """``text``'s syntax tree (:class:`SyntaxError` when it is not one this module reads)."""
    parser = _Parser(text)
    node = parser.expression()
    if parser.peek().kind != "end":
        raise SyntaxError(f"unexpected {parser.peek().text!r} at {parser.peek().at}")
    return node


# --- cel-go's optional syntax, for an evaluator that has optional values but not the syntax ---

#: Library functions the rewritten text calls (:mod:`.cel_library` has them): a value made
#: optional unless it is one; a list literal's and a map literal's ``?`` entries.
OPTIONAL = "__optional__"
OPTIONAL_LIST = "__optional_list__"
OPTIONAL_MAP = "__optional_map__"
#: A string's size in code points, as cel-go counts it (the evaluator's ``size`` counts bytes).
STRING_SIZE = "__string_size__"
#: cel-go's ``string()`` conversion (the evaluator has none of a bool, and writes durations and
#: timestamps its own way).
TO_STRING = "__string__"
_STRING_CALL = re.compile(r"(?<![\w.])string\s*\(")
#: ``all`` and ``exists`` as cel-go evaluates them (an element whose predicate fails to evaluate
#: does not decide when another's is false, or true), each element's predicate run apart.
TOLERANT = {"all": "__all__", "exists": "__exists__"}
#: cel-go's two-variable comprehensions (kube's ``ext.TwoVarComprehensions``) run over a list's
#: ``[index, value]`` or a map's ``[key, value]`` pairs (:data:`PAIRS`); a map is made from pairs
#: (:data:`FROM_PAIRS`) or from maps (:data:`MERGED`).
PAIRS = "__pairs__"
FROM_PAIRS = "__from_pairs__"
MERGED = "__merged__"
#: The two-variable macros, as the one-variable macro each runs as.
_TWO_VARIABLE_TESTS = {
    "all": "all",
    "exists": "exists",
    "exists_one": "exists_one",
    "existsOne": "exists_one",
}
_TRANSFORMS = frozenset({"transformList", "transformMap", "transformMapEntry"})
#: The one-variable macros, whose first argument binds a name.
_ONE_VARIABLE = frozenset({"all", "exists", "exists_one", "map", "filter"})
_TWO_VARIABLE = re.compile(
    r"\.\s*(?:all|exists|exists_one|existsOne|transformList|transformMap|transformMapEntry)\s*\(\s*\w+\s*,\s*\w+\s*,"
)


def plain(
    text: str, string_sizes: frozenset[int] = frozenset(), *, tolerant: frozenset[str] | None = None
) -> str:
    """``text`` with cel-go's syntax and conversions the evaluator lacks written as calls it has
    (``text`` itself when it has none, or when it does not parse: the evaluator then says why):

    - ``a.?b`` is ``a`` made optional, then ``.b``: the evaluator's selection on an optional is
      cel-go's (``optional.none()`` for a missing field or key, and every selection or index
      after it in the chain is optional too); ``a[?k]`` likewise; ``[x, ?y]`` and ``{?k: v}``
      leave out an entry whose optional is none;
    - each ``size`` call at ``string_sizes`` (a string's) is :data:`STRING_SIZE`'s, ``string(x)``
      :data:`TO_STRING`'s;
    - a two-variable comprehension is a one-variable one over pairs: ``l.all(i, v, p)`` is
      ``__pairs__(l).all(x, p)`` with ``i`` read as ``x[0]`` and ``v`` as ``x[1]``;
      ``transformList`` a ``map`` (after a ``filter`` with four arguments), ``transformMap`` a
      map made of the pairs' keys and results, ``transformMapEntry`` the results' maps merged;
    - with ``tolerant`` (the variables in scope), ``l.all(x, p)`` and ``l.exists(x, p)`` are
      :data:`TOLERANT`'s calls with the variables ``p`` reads and ``p``'s text.
    """
    special = "?" in text or string_sizes or _TWO_VARIABLE.search(text) or _STRING_CALL.search(text)
    if not special and tolerant is None:
        return text
    try:
        node = parse(text)
    except (SyntaxError, RecursionError):
        return text
    return _Plain(text, string_sizes, tolerant=tolerant).render(node)


def _idents(node: Node) -> set[str]:
    below = [*([node.target] if node.target is not None else []), *node.args]
    return {node.name} if node.kind == "ident" else set().union(*(_idents(n) for n in below))


def _cel_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _chained(node: Node) -> bool:
    """Whether ``node`` is a selection or index in a chain that holds an optional one already."""
    while node.kind in ("select", "index") and node.target is not None:
        if node.optional:
            return True
        node = node.target
    return False


@dataclass(slots=True)
class _Plain:
    text: str
    string_sizes: frozenset[int] = frozenset()
    #: What a two-variable comprehension's variables are read as, in its body.
    renamed: dict[str, str] = field(default_factory=dict)
    #: The variables in scope, where ``all`` and ``exists`` are written as :data:`TOLERANT`'s calls.
    tolerant: frozenset[str] | None = None

    def render(self, node: Node) -> str:
        if node.kind == "ident" and node.name in self.renamed:
            return self.renamed[node.name]
        if (
            self.tolerant is not None
            and node.kind == "call"
            and node.target is not None
            and node.name in TOLERANT
            and len(node.args) == 2
            and node.args[0].kind == "ident"
        ):
            return self._tolerant(node, self.tolerant)
        if node.kind == "call" and node.target is not None and len(node.args) >= 2:
            names = [arg.name for arg in node.args[:2] if arg.kind == "ident"]
            if len(names) == 2 and (
                (node.name in _TWO_VARIABLE_TESTS and len(node.args) == 3)
                or (node.name in _TRANSFORMS and len(node.args) in (3, 4))
            ):
                return self._two_variables(node, names)
        if (
            node.kind == "call"
            and node.target is not None
            and node.name in _ONE_VARIABLE
            and len(node.args) >= 2
            and node.args[0].kind == "ident"
            and (node.args[0].name in self.renamed or self.tolerant is not None)
        ):
            return self._shadowed(node, [node.args[0].name])
        if node.kind == "call" and node.target is None and node.name == "string" and len(node.args) == 1:
            return f"{TO_STRING}({self.render(node.args[0])})"
        if node.kind == "call" and node.name == "size" and node.at in self.string_sizes:
            operand = node.target if node.target is not None else node.args[0]
            return f"{STRING_SIZE}({self.render(operand)})"
        if node.kind in ("select", "index") and node.optional and node.target is not None:
            target = self.render(node.target)
            base = target if _chained(node.target) else f"{OPTIONAL}({target})"
            if node.kind == "select":
                return f"{base}.{node.name}"
            return f"{base}[{self.render(node.args[0])}]"
        if node.kind == "list" and any(arg.marked for arg in node.args):
            marked = [str(i) for i, arg in enumerate(node.args) if arg.marked]
            items = ", ".join(self.render(arg) for arg in node.args)
            return f"{OPTIONAL_LIST}([{items}], [{', '.join(marked)}])"
        if node.kind == "map" and any(arg.marked for arg in node.args[::2]):
            marked = [str(i // 2) for i, arg in enumerate(node.args) if i % 2 == 0 and arg.marked]
            items = ", ".join(self.render(arg) for arg in node.args)
            return f"{OPTIONAL_MAP}([{items}], [{', '.join(marked)}])"
        children = sorted(
            [*([node.target] if node.target is not None else []), *node.args], key=lambda n: n.start
        )
        out, at = [], node.start
        for child in children:
            out.append(self.text[at : child.start])
            out.append(self.render(child))
            at = child.end
        out.append(self.text[at : node.end])
        return "".join(out)

    def _shadowed(self, node: Node, names: list[str]) -> str:
        """A macro call whose arguments bind ``names`` anew (its target does not): in scope there."""
        assert node.target is not None
        target = self.render(node.target)
        saved, scope = dict(self.renamed), self.tolerant
        for name in names:
            self.renamed.pop(name, None)
        if scope is not None:
            self.tolerant = scope | set(names)
        try:
            args = [self.render(arg) for arg in node.args]
        finally:
            self.renamed, self.tolerant = saved, scope
        return f"{target}.{node.name}({', '.join(args)})"

    def _two_variables(self, node: Node, names: list[str]) -> str:
        assert node.target is not None
        target = self.render(node.target)
        pair = f"__pair{node.at}__"
        saved = dict(self.renamed)
        self.renamed.update({names[0]: f"{pair}[0]", names[1]: f"{pair}[1]"})
        try:
            body = [self.render(arg) for arg in node.args[2:]]
        finally:
            self.renamed = saved
        pairs = f"{PAIRS}({target})"
        if node.name in _TWO_VARIABLE_TESTS:
            return f"{pairs}.{_TWO_VARIABLE_TESTS[node.name]}({pair}, {body[0]})"
        if len(body) == 2:
            pairs = f"{pairs}.filter({pair}, {body[0]})"
        if node.name == "transformList":
            return f"{pairs}.map({pair}, {body[-1]})"
        if node.name == "transformMap":
            return f"{FROM_PAIRS}({pairs}.map({pair}, [{pair}[0], {body[-1]}]))"
        return f"{MERGED}({pairs}.map({pair}, {body[-1]}))"

    def _tolerant(self, node: Node, scope: frozenset[str]) -> str:
        """``node`` as :data:`TOLERANT`'s call, passed every variable in ``scope`` its predicate reads
        (``self``, ``oldSelf``, an enclosing macro's: a two-variable one's pair)."""
        assert node.target is not None
        variable = node.args[0].name
        renamed = {name: read for name, read in self.renamed.items() if name != variable}
        inner = _Plain(self.text, self.string_sizes, renamed=renamed, tolerant=scope | {variable})
        predicate = inner.render(node.args[1])
        read = sorted(
            {
                renamed[name].partition("[")[0] if name in renamed else name
                for name in _idents(node.args[1])
                if name != variable and (name in scope or name in renamed)
            }
        )
        captured = ", ".join(f"'{name}': {name}" for name in read)
        return f"{TOLERANT[node.name]}({self.render(node.target)}, {{{captured}}}, {_cel_string(predicate)}, '{variable}')"
