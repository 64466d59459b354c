"""asyncpg against flashscan serve (crates/server/tests/clients.rs drives it): connect,
fetch / fetchrow / fetchval, prepared statements with parameters, executemany,
transactions (commit and rollback), the type introspection asyncpg runs for a type it has
no built-in codec for (its recursive query over pg_type, before decoding an int8[] column
and binding an int4[] parameter), and copy_records_to_table. Prints `name|value|...`
lines the test compares with its own numbers and with flashscan sql's reading of the files.

    python3 asyncpg_client.py PORT
"""

import asyncio
import datetime
import decimal
import io
import sys

import asyncpg


def cells(values):
    return "|".join("NULL" if v is None else str(v) for v in values)


async def main(port):
    conn = await asyncpg.connect(host="127.0.0.1", port=port, user="flashscan", database="flashscan")
    v = conn.get_server_version()
    print(f"version|{v.major}|{v.minor}")
    print(cells(["current", await conn.fetchval("select current_schema()"), await conn.fetchval("select current_database()")]))
    print(cells(["created", await conn.execute("create table items (id bigint not null, name text, price numeric(10,2), day date, at timestamp, ok boolean, score double precision)")]))
    rows = [
        (i, None if i % 7 == 0 else f"item {i}", decimal.Decimal(i * 125) / 100, datetime.date(2024, 1, 1) + datetime.timedelta(days=i), datetime.datetime(2024, 1, 1, 12, 0, 0) + datetime.timedelta(minutes=i), i % 2 == 0, i / 8)
        for i in range(1, 41)
    ]
    # executemany: one prepared INSERT, 40 parameter sets.
    await conn.executemany("insert into items values ($1, $2, $3, $4, $5, $6, $7)", rows)
    print(cells(["executemany", await conn.fetchval("select count(*) from items")]))
    # Transactions: committed, and rolled back by an exception in the block.
    async with conn.transaction():
        await conn.execute("insert into items (id, name) values (41, 'committed')")
        await conn.execute("insert into items (id, name) values ($1, $2)", 42, "committed")
    try:
        async with conn.transaction():
            await conn.execute("insert into items (id, name) values (43, 'rolled back')")
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    print(cells(["transactions", await conn.fetchval("select count(*) from items"), await conn.fetchval("select count(*) from items where id = 43")]))
    # fetch / fetchrow / fetchval with parameters of several types.
    r = await conn.fetchrow("select count(*) as n, sum(id) as s from items where id >= $1 and day < $2 and name <> $3", 10, datetime.date(2024, 1, 31), "item 12")
    print(cells(["fetchrow", r["n"], r["s"]]))
    r = await conn.fetch("select id, name, price, day, at, ok, score from items where id = any($1::int8[]) order by id", [3, 14, 21])
    for row in r:
        print(cells(["fetch"] + [row[k] for k in ("id", "name", "price", "day", "at", "ok", "score")]))
    # One prepared statement, three parameter sets.
    stmt = await conn.prepare("select count(*) from items where price > $1 and ok = $2")
    print(cells(["prepared"] + [await stmt.fetchval(decimal.Decimal(p), ok) for p, ok in (("10", True), ("10", False), ("40.5", True))]))
    print(cells(["prepared_params"] + [t.name for t in stmt.get_parameters()]))
    # Type introspection: int8[] has no built-in codec in asyncpg, so decoding this column
    # runs its recursive pg_type query first; then an int4[] parameter, encoded by the
    # codec that query built.
    ids = await conn.fetchval("select array_agg(id order by id) from items where id < 5")
    print(cells(["int8_array", ",".join(str(i) for i in ids)]))
    arr = await conn.prepare("select array_agg(id order by id) as ids from items where id < 3")
    print(cells(["introspected"] + [f"{a.name}:{a.type.name}:{a.type.kind}:{a.type.schema}" for a in arr.get_attributes()]))
    print(cells(["int4_param", await conn.fetchval("select count(*) from items where id::int = any($1::int4[])", [1, 2, 99])]))
    print(cells(["oid_param", await conn.fetchval("select typname from pg_type where oid = $1::oid", 1016)]))
    # copy_records_to_table sends binary COPY: taken, or refused saying what to do (and the
    # connection lives on).
    try:
        res = await conn.copy_records_to_table("items", records=[(100, "copied", decimal.Decimal("1.50"), datetime.date(2025, 1, 1), None, True, 0.5)], columns=["id", "name", "price", "day", "at", "ok", "score"])
        print(cells(["copy_records", "ok", res]))
    except asyncpg.PostgresError as e:
        print(cells(["copy_records", type(e).__name__, str(e).replace("|", "/")]))
    print(cells(["after_copy", await conn.fetchval("select 1")]))
    # The CSV COPY asyncpg also sends: taken.
    csv = io.BytesIO(b"200,csv one,2.25,2025-02-01,,true,1.5\n201,,,,,false,\n")
    print(cells(["copy_csv", await conn.copy_to_table("items", source=csv, format="csv", columns=["id", "name", "price", "day", "at", "ok", "score"])]))
    print(cells(["total", await conn.fetchval("select count(*) from items"), await conn.fetchval("select sum(id) from items")]))
    await conn.close()


asyncio.run(main(int(sys.argv[1])))
