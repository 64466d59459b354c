"""psycopg 3's server-side cursors against flashscan serve, unchanged (driven by
crates/server/tests/wire.rs, `psycopg_named_cursors_stream_unchanged`): a named cursor
iterated with a small `itersize` (DECLARE with a bound parameter, FETCH FORWARD n until a
short batch, CLOSE), `fetchmany` / `fetchone` / `fetchall`, `scroll` forward (MOVE) and
backward (refused), a binary cursor (FETCH by the extended protocol with binary results),
a WITH HOLD cursor read after COMMIT, and the command tags a plain cursor sees. Prints one
line per result, `name|value|value...`, for the Rust test to check against flashscan sql's
answers.

    python3 psycopg_cursors_client.py PORT
"""

import sys

import psycopg


def say(name, *values):
    print("|".join([name] + [str(v) for v in values]), flush=True)


def main():
    port = int(sys.argv[1])
    # Not autocommit (psycopg's default): the first statement opens a transaction, in which
    # the named cursors live.
    with psycopg.connect(host="127.0.0.1", port=port, user="psycopg", dbname="flashscan") as conn:
        # Iteration: FETCH FORWARD 7 again and again until fewer than 7 rows come back.
        with conn.cursor(name="parts") as cur:
            cur.itersize = 7
            cur.execute("select p_partkey, p_size from part where p_size < %s order by p_partkey", (20,))
            keys = [row[0] for row in cur]
            say("iterated", len(keys), sum(keys), keys[0], keys[-1])
        # fetchmany, fetchone, scroll forward (MOVE), fetchall.
        with conn.cursor(name="Mixed Case") as cur:
            cur.execute("select p_partkey from part order by p_partkey")
            many = [r[0] for r in cur.fetchmany(5)]
            one = cur.fetchone()[0]
            cur.scroll(10)
            rest = [r[0] for r in cur.fetchall()]
            say("fetchmany", ",".join(map(str, many)), one, rest[0], len(rest))
        # Backward is refused in one line, with what to do; the transaction is then aborted.
        with conn.cursor(name="back") as cur:
            cur.execute("select p_partkey from part order by p_partkey")
            cur.fetchmany(3)
            try:
                cur.scroll(-1)
                say("scroll_back", "accepted")
            except psycopg.Error as e:
                say("scroll_back", type(e).__name__, e.sqlstate, str(e).splitlines()[0])
        conn.rollback()
        # A binary cursor: the FETCHes ask for binary results by the extended protocol.
        with conn.cursor(name="bin", binary=True) as cur:
            cur.execute("select p_partkey, p_name, p_retailprice from part where p_partkey <= %s order by p_partkey", (3,))
            rows = cur.fetchall()
            say("binary", *[f"{k}:{n}:{p}" for k, n, p in rows])
        conn.commit()
        # WITH HOLD: the cursor outlives the COMMIT (its rows kept by the server).
        with conn.cursor(name="held", withhold=True) as cur:
            cur.execute("select p_partkey from part where p_partkey <= 4 order by p_partkey")
            first = cur.fetchone()[0]
            conn.commit()
            rest = [r[0] for r in cur.fetchall()]
            say("withhold", first, ",".join(map(str, rest)))
        conn.commit()
        # A named cursor closed before it was executed, inside a transaction: psycopg asks
        # pg_cursors whether it exists before sending CLOSE.
        conn.execute("select 1")
        with conn.cursor(name="never_declared") as cur:
            pass
        conn.execute("DECLARE stolen CURSOR FOR select p_partkey from part order by p_partkey")
        with conn.cursor(name="stolen") as cur:
            say("stolen", ",".join(str(r[0]) for r in cur.fetchmany(2)))
        conn.commit()
        # The command tags, as a plain cursor reports them.
        cur = conn.cursor()
        tags = []
        for statement in [
            "DECLARE t CURSOR FOR select p_partkey from part order by p_partkey",
            "FETCH 2 FROM t",
            "MOVE FORWARD 3 IN t",
            "FETCH ALL FROM t",
            "FETCH NEXT FROM t",
            "CLOSE t",
        ]:
            cur.execute(statement)
            tags.append(cur.statusmessage)
        say("tags", *tags)
        conn.commit()
        # Outside a transaction block (autocommit), DECLARE without HOLD is refused.
        conn.autocommit = True
        try:
            conn.execute("DECLARE x CURSOR FOR select 1")
            say("outside_block", "accepted")
        except psycopg.Error as e:
            say("outside_block", e.sqlstate, str(e).splitlines()[0])


if __name__ == "__main__":
    main()
