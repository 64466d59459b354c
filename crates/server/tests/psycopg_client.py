"""psycopg 3 against flashscan serve (driven by crates/server/tests/wire.rs,
`psycopg_queries_parameters_and_types`): a parameterised query, `::regtype` and
`::regclass` casts, psycopg's own type lookup (`TypeInfo.fetch`, which asks the catalog
with `to_regtype`, inside a savepoint when a transaction is open) and the catalog queries a
`\\d`-like tool writes. Prints one line per result, `name|value|value...` (NULL for None),
for the Rust test to check against flashscan sql's answers.

    python3 psycopg_client.py PORT
"""

import datetime
import sys

import psycopg
from psycopg.types import TypeInfo


def cell(v):
    return "NULL" if v is None else str(v)


def say(name, *rows):
    for row in rows:
        print("|".join([name] + [cell(v) for v in row]), flush=True)


def main():
    port = int(sys.argv[1])
    # Not autocommit (psycopg's default): the first statement opens a transaction, so
    # TypeInfo.fetch below nests in it with SAVEPOINT / RELEASE.
    with psycopg.connect(host="127.0.0.1", port=port, user="psycopg", dbname="flashscan") as conn:
        cur = conn.cursor()
        # Server-side parameters ($1, $2), an int and a str (sent as "unknown", typed by the server).
        cur.execute("select count(*), sum(p_size), min(p_name) from part where p_size < %s and p_brand = %s", (10, "Brand#13"))
        say("params", *cur.fetchall())
        cur.execute("select count(*) from lineitem where l_shipdate < %s and l_quantity > %s", (datetime.date(1994, 1, 1), 30))
        say("date_param", *cur.fetchall())
        # The same statement five times: psycopg prepares it (a named statement) from the
        # fifth execution on.
        counts = []
        for size in range(1, 7):
            cur.execute("select count(*) from part where p_size = %s", (size,))
            counts.append(cur.fetchone()[0])
        say("prepared", counts)
        # ::regtype casts, by parameter and literal, and their names.
        cur.execute("select %s::regtype::text, 'numeric'::regtype::text, 'int8'::regtype, 23::regtype::text", ("integer",))
        say("regtype", *cur.fetchall())
        # psycopg's own lookup: found, and not found (None, no error).
        info = TypeInfo.fetch(conn, "numeric")
        say("typeinfo", (info.name, info.oid, info.array_oid, info.regtype))
        say("typeinfo_missing", (TypeInfo.fetch(conn, "no_such_type"),))
        # What a \d-like tool asks: columns with their types, by name and by ::regclass.
        cur.execute(
            "select a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull "
            "from pg_catalog.pg_attribute a join pg_catalog.pg_class c on c.oid = a.attrelid "
            "join pg_catalog.pg_namespace n on n.oid = c.relnamespace "
            "where c.relname = %s and n.nspname = 'public' and a.attnum > 0 and not a.attisdropped order by a.attnum",
            ("part",),
        )
        say("columns", *cur.fetchall())
        cur.execute("select attname from pg_attribute where attrelid = %s::regclass and attnum > 0 order by attnum", ("part",))
        say("regclass_columns", [r[0] for r in cur.fetchall()])
        # An unknown type by cast is PostgreSQL's error; the connection goes on after ROLLBACK.
        try:
            cur.execute("select 'no_such_type'::regtype")
            say("bad_cast", ("no error",))
        except psycopg.Error as e:
            say("bad_cast", (type(e).__name__, str(e).splitlines()[0]))
        conn.rollback()
        cur.execute("select 1 + %s", (41,))
        say("after_rollback", *cur.fetchall())


if __name__ == "__main__":
    main()
