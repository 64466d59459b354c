#!/usr/bin/env python3
"""Random transactions run on flashscan and on PostgreSQL side by side; every answer compared.

What it checks: a transaction reads its own writes, changes rows it changed before,
SAVEPOINT / RELEASE / ROLLBACK TO undo what they should, a failed statement aborts the
block until ROLLBACK (TO), and another connection sees only committed rows. PostgreSQL is
the oracle: the same statements, in the same order, on the same starting tables.

  python3 bench/conformance/transactions_vs_postgres.py \
      --flashscan 'host=127.0.0.1 port=55432 user=x dbname=flashscan' \
      --postgres 'host=127.0.0.1 port=5499 user=postgres dbname=postgres' \
      --statements 3000 --seed 1

Prints the statements run, the answers compared and the mismatches (each with the
statement and both answers); exits 1 on a mismatch.
"""
import argparse
import random
import sys

import psycopg


def run(conn, sql):
    """('ok', rows) or ('error', SQLSTATE) for one statement."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall() if cur.description else None
            return ("ok", None if rows is None else [tuple(str(v) for v in r) for r in rows])
    except psycopg.Error as e:
        return ("error", e.sqlstate)


def statements(rng, count, failed):
    """Yields statements of random transactions over tables p (keyed) and h (heap).
    `failed()` says whether the last statement failed (PostgreSQL's answer): the block is
    then rolled back to a savepoint, or whole."""
    in_block = False
    savepoints = 0
    for _ in range(count):
        if in_block and failed():
            if savepoints and rng.random() < 0.7:
                yield f"ROLLBACK TO SAVEPOINT s{rng.randrange(savepoints)}"
            else:
                in_block = False
                yield "ROLLBACK"
            continue
        if not in_block:
            in_block = True
            savepoints = 0
            yield "BEGIN"
            continue
        k = rng.randrange(40)
        d = rng.randrange(-5, 6)
        r = rng.randrange(100)
        if r < 14:
            yield f"INSERT INTO p VALUES ({k}, {d})"
        elif r < 20:
            yield f"INSERT INTO h VALUES ({k}, {d}), ({k + 1}, {d * 2})"
        elif r < 24:
            yield f"INSERT INTO h SELECT k, v FROM p WHERE k BETWEEN {k} AND {k + 3}"
        elif r < 34:
            yield f"UPDATE p SET v = v + {d} WHERE k = {k}"
        elif r < 39:
            yield f"UPDATE p SET v = v - {d} WHERE k BETWEEN {k} AND {k + 6}"
        elif r < 44:
            yield f"UPDATE p SET k = k + 40 WHERE k = {k}"
        elif r < 49:
            yield f"UPDATE h SET v = v + {d} WHERE k = {k}"
        elif r < 52:
            yield f"UPDATE p SET v = v + 1 WHERE k IN (SELECT k FROM h WHERE v > {d})"
        elif r < 58:
            yield f"DELETE FROM p WHERE k = {k}"
        elif r < 62:
            yield f"DELETE FROM h WHERE v > {d}"
        elif r < 70:
            yield "SELECT (SELECT count(*) FROM p), (SELECT coalesce(sum(v), 0) FROM p), (SELECT count(*) FROM h), (SELECT coalesce(sum(v), 0) FROM h)"
        elif r < 75:
            yield f"SELECT v FROM p WHERE k = {k}"
        elif r < 78:
            yield "SELECT k, v FROM p ORDER BY k"
        elif r < 81:
            yield "SELECT k, v FROM h ORDER BY k, v"
        elif r < 86:
            yield f"SAVEPOINT s{savepoints}"
            savepoints += 1
        elif r < 90 and savepoints:
            yield f"ROLLBACK TO SAVEPOINT s{rng.randrange(savepoints)}"
        elif r < 92 and savepoints:
            yield f"RELEASE SAVEPOINT s{rng.randrange(savepoints)}"
        elif r < 97:
            in_block = False
            yield "COMMIT"
        else:
            in_block = False
            yield "ROLLBACK"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flashscan", required=True, help="libpq connection string of flashscan serve")
    ap.add_argument("--postgres", required=True, help="libpq connection string of PostgreSQL")
    ap.add_argument("--statements", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sides = {}
    for name, dsn in (("flashscan", args.flashscan), ("postgres", args.postgres)):
        conn = psycopg.connect(dsn, autocommit=True)
        other = psycopg.connect(dsn, autocommit=True)
        for sql in ("DROP TABLE IF EXISTS p", "DROP TABLE IF EXISTS h", "CREATE TABLE p (k bigint PRIMARY KEY, v bigint NOT NULL)", "CREATE TABLE h (k bigint, v bigint)"):
            kind, answer = run(conn, sql)
            if kind != "ok":
                sys.exit(f"{name}: {sql}: {answer}")
        sides[name] = (conn, other)
    rng = random.Random(args.seed)
    compared = mismatches = errors = 0
    answers = {}
    for i, sql in enumerate(statements(rng, args.statements, lambda: answers["postgres"][0] == "error")):
        answers = {name: run(conn, sql) for name, (conn, _) in sides.items()}
        compared += 1
        errors += answers["postgres"][0] == "error"
        if answers["flashscan"] != answers["postgres"]:
            mismatches += 1
            print(f"MISMATCH at {i}: {sql}\n  flashscan: {answers['flashscan']}\n  postgres:  {answers['postgres']}")
        if i % 50 == 0:
            # Another connection sees committed rows only.
            committed = {name: run(other, "SELECT k, v FROM p ORDER BY k") for name, (_, other) in sides.items()}
            compared += 1
            if committed["flashscan"] != committed["postgres"]:
                mismatches += 1
                print(f"MISMATCH at {i} (other connection): flashscan {committed['flashscan']}, postgres {committed['postgres']}")
    print(f"{compared} answers compared ({errors} statements PostgreSQL refused), {mismatches} mismatches, seed {args.seed}")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
