"""Shadows of the catalog: a function or operator of a catalog name, planted in a schema a
database's owner can write, with argument types that win over the catalog's wherever a
session's search_path lets them (``public.unnest(text[])`` over
``pg_catalog.unnest(anyarray)``, ``public.=(varchar, varchar)`` over ``text = text``).

Which names to shadow is read from the product's SQL itself: every named block, every
migration and every plpgsql body it creates, parsed by PostgreSQL's own parser
(pglast). A new query is covered without a change here. Each shadow is plpgsql, so
PostgreSQL counts its calls (``track_functions``), whoever makes them.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import pglast
import psycopg
import yaml
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgq_exporter.pg.connect import Conn
from pgq_exporter.queue.sql import migrations
from pgq_exporter.sql import parse_named_blocks
from tests.support import wait_for

# The tests' own sessions search only the catalog too, so that they call no shadow.
PINNED = "-c search_path=pg_catalog,pg_temp"

# What an operator expression of each kind calls, beside its own name.
_IMPLIED = {
    "AEXPR_IN": ("=", "<>"),
    "AEXPR_LIKE": ("~~", "!~~"),
    "AEXPR_ILIKE": ("~~*", "!~~*"),
    "AEXPR_SIMILAR": ("~", "!~"),
    "AEXPR_BETWEEN": (">=", "<="),
    "AEXPR_NOT_BETWEEN": ("<", ">"),
    "AEXPR_BETWEEN_SYM": (">=", "<="),
    "AEXPR_NOT_BETWEEN_SYM": ("<", ">"),
    "AEXPR_NULLIF": ("=",),
    "AEXPR_DISTINCT": ("=",),
    "AEXPR_NOT_DISTINCT": ("=",),
}
# A template's placeholders: {name} (a quoted name, a list, a bound) and %(name)s.
_PLACEHOLDER = re.compile(r"\{(\w+)\}|%\((\w+)\)[sb]")
# A placeholder that stands for a whole query: FROM ({block}) AS ...
_SUBQUERY = re.compile(r"\bFROM\s*\(\{\w+\}\)", re.IGNORECASE)
# plpgsql's parse modes: a whole statement, an expression, or an assignment's target.
_STATEMENT, _EXPRESSION = 0, 2


@dataclass
class Calls:
    """The catalog functions and operators a text calls, by name."""

    functions: set[str] = field(default_factory=set)
    operators: set[str] = field(default_factory=set)

    def add(self, other: Calls) -> None:
        self.functions |= other.functions
        self.operators |= other.operators


def product_sql() -> Iterator[tuple[str, str]]:
    """(where, text) of every SQL text the product runs or installs: the named blocks,
    the migrations, and the queries postgres_exporter runs from the bundle (rendered,
    since their blocks embed one another)."""
    yield from _named_blocks(files("pgq_exporter"), "pgq_exporter")
    for migration in migrations():
        yield f"migration {migration.version}", migration.for_schema("pgq")
    for path in sorted(QUERIES_FILES.glob("*.yaml")):
        for key, entry in yaml.safe_load(path.read_text(encoding="utf-8")).items():
            yield f"{path.name}:{key}", entry["query"]


QUERIES_FILES = Path(__file__).parents[2] / "contrib/postgres_exporter"
# Templates whose placeholders stand for other blocks: read as rendered, above.
_RENDERED_ELSEWHERE = {"postgres_exporter.sql"}


def _named_blocks(folder: Traversable, where: str) -> Iterator[tuple[str, str]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir() and entry.name not in ("migrations", "__pycache__"):
            yield from _named_blocks(entry, f"{where}/{entry.name}")
        elif entry.name.endswith(".sql") and entry.name not in _RENDERED_ELSEWHERE:
            for name, text in parse_named_blocks(entry.read_text(encoding="utf-8")).items():
                yield f"{where}/{entry.name}:{name}", text


def calls_in(text: str) -> Calls:
    """The unqualified (or pg_catalog-qualified) functions and the operators ``text``
    calls, plpgsql bodies included."""
    found = Calls()
    source = _parseable(text).encode()
    for statement in pglast.parse_sql(source.decode()):
        _walk(statement.stmt, found)
        if type(statement.stmt).__name__ == "CreateFunctionStmt":
            start = statement.stmt_location or 0
            end = start + statement.stmt_len if statement.stmt_len else len(source)
            _walk_body(statement.stmt, source[start:end].decode(), found)
    return found


def product_calls() -> Calls:
    found = Calls()
    for where, text in product_sql():
        try:
            found.add(calls_in(text))
        except pglast.parser.ParseError as exc:
            raise AssertionError(f"{where}: {exc}") from None
    return found


def _parseable(text: str) -> str:
    """The template with each placeholder made a plain name (one that stands for a
    block in parentheses, a query), and %% a %."""
    text = _SUBQUERY.sub("FROM (SELECT 1 AS x)", text)
    return _PLACEHOLDER.sub(lambda m: f"x_{m.group(1) or m.group(2)}", text).replace("%%", "%")


def _walk(node: Any, found: Calls) -> None:
    if isinstance(node, tuple | list):
        for item in node:
            _walk(item, found)
        return
    if not isinstance(node, pglast.ast.Node):
        return
    if isinstance(node, pglast.ast.FuncCall):
        names = [n.sval for n in node.funcname or ()]
        if len(names) == 1 or names[0] == "pg_catalog":
            found.functions.add(names[-1])
    elif isinstance(node, pglast.ast.A_Expr):
        found.operators.update(_operators(node))
    for name in node:  # every attribute of the node
        _walk(getattr(node, name), found)


def _operators(node: Any) -> set[str]:
    kind = node.kind.name
    names = {n.sval for n in node.name or () if hasattr(n, "sval")}
    return {*(n for n in names if not n.isalpha()), *_IMPLIED.get(kind, ())}


def _walk_body(node: Any, text: str, found: Calls) -> None:
    """The calls of a plpgsql function's body, each of its statements and expressions
    parsed as SQL."""
    language = next((o.arg.sval for o in node.options or () if o.defname == "language"), "")
    if language != "plpgsql":
        return
    for query, mode in _plpgsql_queries(json.loads(json.dumps(pglast.parse_plpgsql(text)))):
        if mode == _STATEMENT:
            text = query
        elif mode == _EXPRESSION:
            text = f"SELECT {query}"
        else:  # an assignment: "target := expression"
            text = "SELECT " + re.split(r":=|=", query, maxsplit=1)[-1]
        found.add(calls_in(text))


def _plpgsql_queries(tree: Any) -> Iterator[tuple[str, int]]:
    if isinstance(tree, dict):
        expr = tree.get("PLpgSQL_expr")
        if isinstance(expr, dict) and "query" in expr:
            yield expr["query"], int(expr.get("parseMode", 0))
        for value in tree.values():
            yield from _plpgsql_queries(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _plpgsql_queries(value)


# -- planting ---------------------------------------------------------------------------

# Concrete types a polymorphic argument of the catalog's is replaced with, each of which
# a call could pass; the database's own enums are added.
_ELEMENTS = ("text", "character varying", "bigint", "integer", "timestamp with time zone",
             "uuid", "jsonb", "boolean", "double precision", "numeric")  # fmt: skip
_POLYMORPHIC = {"anyelement", "anycompatible", "anynonarray", "anycompatiblenonarray"}
_POLYMORPHIC_ARRAYS = {"anyarray", "anycompatiblearray"}
# Types no plpgsql function can take or return.
_UNUSABLE = {"internal", '"any"', "anyrange", "anymultirange", "anycompatiblerange",
             "anycompatiblemultirange", "cstring", "trigger", "event_trigger",
             "language_handler", "fdw_handler", "index_am_handler", "tsm_handler",
             "table_am_handler", "record", "void", "unknown"}  # fmt: skip

_CATALOG_FUNCTIONS = """
SELECT p.proname::text, p.prokind::text, p.proretset,
       coalesce(array(SELECT pg_catalog.format_type(t, NULL)
                      FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) AS t), '{}'),
       pg_catalog.format_type(p.prorettype, NULL)
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'pg_catalog'::pg_catalog.regnamespace
  AND p.proname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.name[])
  AND p.prokind IN ('f', 'a') AND p.provariadic = 0
"""
_CATALOG_OPERATORS = """
SELECT o.oprname::text, pg_catalog.format_type(o.oprleft, NULL),
       pg_catalog.format_type(o.oprright, NULL), pg_catalog.format_type(o.oprresult, NULL)
FROM pg_catalog.pg_operator o
WHERE o.oprnamespace = 'pg_catalog'::pg_catalog.regnamespace AND o.oprkind = 'b'
  AND o.oprname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.name[])
"""
_ENUMS = """
SELECT pg_catalog.format_type(t.oid, NULL) FROM pg_catalog.pg_type t
WHERE t.typtype = 'e' AND t.typnamespace <> 'pg_catalog'::pg_catalog.regnamespace
"""


def _variants(types: tuple[str, ...], elements: tuple[str, ...]) -> set[tuple[str, ...]]:
    """``types`` as the catalog declares them, with every polymorphic type made each
    concrete one, and with every text made varchar: each would win over the catalog's
    for a call of those types."""
    found = {types}
    if any(t in _POLYMORPHIC | _POLYMORPHIC_ARRAYS or t == "anyenum" for t in types):
        for element in elements:
            found.add(tuple(element if t in _POLYMORPHIC or t == "anyenum"
                            else f"{element}[]" if t in _POLYMORPHIC_ARRAYS else t
                            for t in types))  # fmt: skip
    if "text" in types:
        found.add(tuple("character varying" if t == "text" else t for t in types))
    return {v for v in found if not any(t.startswith("any") or t in _UNUSABLE for t in v)}


def _result(declared: str, arguments: tuple[str, ...], catalogs: tuple[str, ...]) -> str:
    """The result type of a variant: a polymorphic result takes its arguments' type."""
    if declared in _POLYMORPHIC or declared == "anyenum":
        concrete = [a for a, c in zip(arguments, catalogs, strict=True) if a != c]
        return concrete[0].removesuffix("[]") if concrete else "text"
    if declared in _POLYMORPHIC_ARRAYS:
        concrete = [a for a, c in zip(arguments, catalogs, strict=True) if a != c]
        element = concrete[0].removesuffix("[]") if concrete else "text"
        return f"{element}[]"
    return declared


@dataclass
class Planted:
    """The shadows planted in one database: their oids, by what they shadow."""

    oids: dict[int, str] = field(default_factory=dict)

    def called(self, conn: Conn) -> dict[str, int]:
        """What was called, and how often, as PostgreSQL counted it."""
        rows = conn.execute(
            "SELECT f.funcid::int, f.calls FROM pg_catalog.pg_stat_user_functions f "
            "WHERE f.funcid OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.oid[]) AND f.calls > 0",
            (list(self.oids),),
        ).fetchall()
        return {self.oids[oid]: calls for oid, calls in rows}


def plant(conn: Conn, schemas: list[str], calls: Calls) -> Planted:
    """Shadows of ``calls`` in each of ``schemas``, by the connected role, which must be
    able to create there."""
    enums = tuple(row[0] for row in conn.execute(_ENUMS))
    elements = (*_ELEMENTS, *enums)
    planted = Planted()
    made_already: set[tuple[str, str, tuple[str, ...]]] = set()
    functions = conn.execute(_CATALOG_FUNCTIONS, (sorted(calls.functions),)).fetchall()
    operators = conn.execute(_CATALOG_OPERATORS, (sorted(calls.operators),)).fetchall()
    with conn.transaction():
        for schema in schemas:
            for name, kind, setof, arguments, result in functions:
                for variant in _variants(tuple(arguments), elements):
                    returns = _result(result, variant, tuple(arguments))
                    if not _first_usable(returns, (schema, name, variant), made_already):
                        continue
                    made = (_aggregate if kind == "a" else _function)(
                        conn, schema, name, variant, returns, setof=setof
                    )
                    planted.oids[made] = f"{schema}.{name}({', '.join(variant)})"
            for name, left, right, result in operators:
                for variant in _variants((left, right), elements):
                    returns = _result(result, variant, (left, right))
                    if not _first_usable(returns, (schema, name, variant), made_already):
                        continue
                    made = _operator(conn, schema, name, variant, returns)
                    planted.oids[made] = f"{schema}.{name} ({', '.join(variant)})"
    return planted


def _function(
    conn: Conn, schema: str, name: str, arguments: tuple[str, ...], returns: str, *, setof: bool
) -> int:
    body = "BEGIN RETURN; END" if setof else "BEGIN RETURN NULL; END"
    statement = sql.SQL(
        "CREATE OR REPLACE FUNCTION {}.{}({}) RETURNS {}{} LANGUAGE plpgsql AS {} "
    ).format(sql.Identifier(schema), sql.Identifier(name), _types(arguments),
             sql.SQL("SETOF " if setof else ""), sql.SQL(returns), sql.Literal(body))  # fmt: skip
    conn.execute(statement)
    return _oid(conn, schema, name, arguments)


_SHADOW_STEP = "pgq_shadow_step"
_numbers = itertools.count()


def _aggregate(
    conn: Conn, schema: str, name: str, arguments: tuple[str, ...], returns: str, *, setof: bool
) -> int:
    """An aggregate whose step function is a shadow of its own, counted per row."""
    step = f"{_SHADOW_STEP}_{name}"
    step_oid = _function(conn, schema, step, (returns, *arguments), returns, setof=False)
    conn.execute(
        sql.SQL("CREATE OR REPLACE AGGREGATE {}.{}({}) (SFUNC = {}.{}, STYPE = {})").format(
            sql.Identifier(schema),
            sql.Identifier(name),
            _types(arguments) if arguments else sql.SQL("*"),
            sql.Identifier(schema),
            sql.Identifier(step),
            sql.SQL(returns),
        )
    )
    return step_oid


def _operator(conn: Conn, schema: str, name: str, arguments: tuple[str, ...], returns: str) -> int:
    function = f"pgq_shadow_op_{next(_numbers)}"
    oid = _function(conn, schema, function, arguments, returns, setof=False)
    conn.execute(
        sql.SQL("CREATE OPERATOR {}.{} (LEFTARG = {}, RIGHTARG = {}, FUNCTION = {}.{})").format(
            sql.Identifier(schema),
            sql.SQL(name),
            sql.SQL(arguments[0]),
            sql.SQL(arguments[1]),
            sql.Identifier(schema),
            sql.Identifier(function),
        )
    )
    return oid


def _types(arguments: tuple[str, ...]) -> sql.Composable:
    return sql.SQL(", ").join(sql.SQL(t) for t in arguments)


def _oid(conn: Conn, schema: str, name: str, arguments: tuple[str, ...]) -> int:
    signature = f"{sql.Identifier(schema).as_string()}.{sql.Identifier(name).as_string()}"
    row = conn.execute(
        "SELECT %s::pg_catalog.regprocedure::pg_catalog.oid::int",
        (f"{signature}({', '.join(arguments)})",),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _first_usable(
    returns: str, key: tuple[str, str, tuple[str, ...]], made: set[tuple[str, str, tuple[str, ...]]]
) -> bool:
    """Whether a shadow returning ``returns`` can be made and is not made yet; if so, it
    counts as made from now."""
    if returns in _UNUSABLE or returns.startswith("any") or key in made:
        return False
    made.add(key)
    return True


def pinned(dsn: str, **kwargs: str) -> str:
    """``dsn`` for a session of the test's own, which calls no shadow."""
    return make_conninfo(dsn, options=PINNED, **kwargs)


def called_once_ended(dsn: str, planted: Planted) -> dict[str, int]:
    """The shadows called in ``dsn``'s database, once every other session of it has
    ended (a session's counts reach the statistics when it ends)."""
    with psycopg.connect(pinned(dsn), autocommit=True) as conn:
        wait_for(
            lambda: conn.execute(
                "SELECT count(*) FROM pg_catalog.pg_stat_activity "
                "WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database() "
                "AND pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()"
            ).fetchone(),
            "the other sessions to end",
            until=lambda row: row is not None and row[0] == 0,
        )
        conn.execute("SELECT pg_catalog.pg_stat_clear_snapshot()")
        return planted.called(conn)
