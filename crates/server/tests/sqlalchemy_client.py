"""SQLAlchemy 2 (psycopg 3 driver, `postgresql+psycopg://`) and pandas against flashscan
serve, unchanged (driven by crates/server/tests/wire.rs, `sqlalchemy_and_pandas_work_unchanged`,
on an empty database made by `flashscan init`): connect, `DataFrame.to_sql` (if_exists
'fail' and 'append'), reflection (`inspect`, `MetaData.reflect`), a Core select with bound
parameters, and `pandas.read_sql` of a query and of a table name, whole and in chunks.

Prints one line per result, `name|value|value...` (NULL for None), for the Rust test to
check; the frames read back are compared here with the one written (cell by cell, see
`cells`) and print `same` or the first difference.

    python3 sqlalchemy_client.py PORT
"""

import math
import sys

import pandas as pd
import sqlalchemy as sa


def cell(v):
    return "NULL" if v is None else str(v)


def say(name, *values):
    print("|".join([name] + [cell(v) for v in values]), flush=True)


def the_frame():
    """What a pandas user writes: the column types pandas maps to BIGINT, TEXT, FLOAT(53),
    BOOLEAN and TIMESTAMP WITHOUT TIME ZONE, with missing values, a float that 32 bits
    would change (0.1) and one they cannot hold (1e300)."""
    return pd.DataFrame(
        {
            "id": [1, 2, 3, 4],
            "name": ["alpha", "beta", None, "délta"],
            "score": [0.1, 2.5, None, -1e300],
            "ok": [True, False, True, False],
            "at": pd.to_datetime(["2024-01-01 10:00:00", "2024-02-29 23:59:59.123456", "1999-12-31 00:00:00", "2030-06-15 12:00:00"], format="ISO8601"),
        }
    )


def cells(frame):
    """Rows as comparable Python values: NaN/NaT/None as None, timestamps as ISO text
    (pandas may pick another resolution or dtype for the same values read back)."""
    rows = []
    for row in frame.astype(object).itertuples(index=False):
        out = []
        for v in row:
            if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT:
                out.append(None)
            elif isinstance(v, pd.Timestamp):
                out.append(v.isoformat())
            elif hasattr(v, "isoformat"):
                out.append(pd.Timestamp(v).isoformat())
            else:
                out.append(v.item() if hasattr(v, "item") else v)
        rows.append(tuple(out))
    return rows


def compare(name, got, expected):
    a, b = cells(got), cells(expected)
    if list(got.columns) != list(expected.columns):
        say(name, "columns differ", list(got.columns), list(expected.columns))
    elif a != b:
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        say(name, f"{len(a)} rows vs {len(b)}", "row", first, a[first] if first < len(a) else None, b[first] if first < len(b) else None)
    else:
        say(name, "same")


def main():
    port = int(sys.argv[1])
    engine = sa.create_engine(f"postgresql+psycopg://pandas@127.0.0.1:{port}/flashscan")
    frame = the_frame()
    # Connecting: the dialect reads version(), current_schema(), the isolation level …
    with engine.connect() as c:
        say("version", *engine.dialect.server_version_info)
        say("current", *c.execute(sa.text("select current_schema(), current_database()")).one())
        # The pid the server gave this connection at startup (its cancel key's).
        pid = c.execute(sa.text("select pg_backend_pid()")).scalar_one()
        say("backend_pid", pid == c.connection.driver_connection.info.backend_pid, pid > 0)

    # to_sql creates the table (no key: pandas declares none with index=False) and inserts.
    say("to_sql", frame.to_sql("frames", engine, index=False, if_exists="fail"))
    try:
        frame.to_sql("frames", engine, index=False, if_exists="fail")
        say("to_sql_again", "no error")
    except ValueError as e:
        say("to_sql_again", str(e))
    say("to_sql_append", frame.to_sql("frames", engine, index=False, if_exists="append"))

    # Reflection.
    inspector = sa.inspect(engine)
    say("tables", *inspector.get_table_names())
    say("has_table", inspector.has_table("frames"), inspector.has_table("no_such_table"))
    for column in inspector.get_columns("frames"):
        say("column", column["name"], column["type"], column["nullable"], column["default"])
    say("pk", len(inspector.get_pk_constraint("frames")["constrained_columns"]))
    say("indexes", len(inspector.get_indexes("frames")))
    say("foreign_keys", len(inspector.get_foreign_keys("frames")))
    say("unique", len(inspector.get_unique_constraints("frames")))
    say("comment", inspector.get_table_comment("frames")["text"])
    metadata = sa.MetaData()
    metadata.reflect(engine)
    say("reflected", *sorted(metadata.tables))
    frames = metadata.tables["frames"]
    say("reflected_columns", *[f"{c.name}:{c.type}" for c in frames.columns])

    # Core select with bound parameters (server-side: $1, $2).
    query = sa.select(frames.c.id, frames.c.name, frames.c.score).where(frames.c.id >= sa.bindparam("lo"), frames.c.name != sa.bindparam("skip")).order_by(frames.c.id)
    with engine.connect() as c:
        rows = c.execute(query, {"lo": 2, "skip": "beta"}).all()
    say("core_select", *[f"{r.id}:{r.name}:{r.score}" for r in rows])
    with engine.connect() as c:
        say("core_count", c.execute(sa.select(sa.func.count()).select_from(frames).where(frames.c.ok == sa.bindparam("ok")), {"ok": True}).scalar_one())

    # read_sql: a query, a query with parameters, a table name (reflected), in chunks.
    expected = pd.concat([frame, frame]).sort_values("id", kind="stable").reset_index(drop=True)
    back = pd.read_sql("select * from frames order by id, name", engine)
    say("read_sql_rows", len(back))
    compare("read_sql_query", back.sort_values("id", kind="stable").reset_index(drop=True), expected)
    params = pd.read_sql(sa.text("select id, score from frames where score > :s order by id"), engine, params={"s": 0.05})
    say("read_sql_params", *[f"{r.id}:{r.score}" for r in params.itertuples()])
    table = pd.read_sql("frames", engine)
    say("read_sql_table_dtypes", *[f"{n}:{t}" for n, t in table.dtypes.items()])
    compare("read_sql_table", table.sort_values(["id", "name"], kind="stable").reset_index(drop=True), expected)
    say("read_sql_chunks", *[len(c) for c in pd.read_sql("select * from frames", engine, chunksize=3)])
    say("read_sql_table_chunks", *[len(c) for c in pd.read_sql("frames", engine, chunksize=5)])

    # A tz-aware column: psycopg binds its values as timestamptz; each moment is kept (read
    # back in UTC, whether the column keeps the zone or not).
    berlin = pd.DataFrame({"k": [1, 2], "t": pd.to_datetime(["2024-01-01 10:00", "2024-06-01 12:00"]).tz_localize("Europe/Berlin")})
    berlin.to_sql("moments", engine, index=False)
    moments = pd.read_sql("select k, t from moments order by k", engine)["t"]
    utc = moments.dt.tz_convert("UTC").dt.tz_localize(None) if moments.dt.tz is not None else moments
    say("moments", *[t.isoformat() for t in utc])

    # The DataFrame's index written as a column of its own, named `index` (a keyword in
    # some SQL dialects, a name in PostgreSQL's): works. pandas' default (index=True) also
    # creates a secondary index on it (CREATE INDEX), which lookups by it then use.
    say("to_sql_reset_index", frame.reset_index().to_sql("frames_ix", engine, index=False))
    with engine.connect() as c:
        say("index_column", *[f"{r[0]}:{r[1]}" for r in c.execute(sa.text('select "index", id from frames_ix order by "index"'))])
    say("to_sql_index", frame.to_sql("frames_idx", engine))
    with engine.connect() as c:
        say("indexed_lookup", *[f"{r[0]}:{r[1]}" for r in c.execute(sa.text('select "index", id from frames_idx where "index" = 2'))])

    # Keys reflected: SQLAlchemy's queries pair unnest(indkey) with generate_subscripts.
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE keyed (id BIGINT PRIMARY KEY, code TEXT UNIQUE, v INT)"))
    inspector = sa.inspect(engine)
    pk = inspector.get_pk_constraint("keyed")
    say("keyed_pk", pk["name"], *pk["constrained_columns"])
    say("keyed_unique", *[f"{u['name']}:{','.join(u['column_names'])}" for u in inspector.get_unique_constraints("keyed")])
    with engine.begin() as c:
        c.execute(sa.text("CREATE INDEX keyed_v ON keyed (v, code)"))
    inspector = sa.inspect(engine)
    say("keyed_indexes", *sorted(f"{i['name']}:{','.join(i['column_names'])}:{i['unique']}" for i in inspector.get_indexes("keyed")))

    # A unit of work as applications write it: rows written, then read back before COMMIT
    # (a transaction reads its own writes), a nested transaction (SAVEPOINT) rolled back
    # on a duplicate key while the outer one goes on, and an engine at REPEATABLE READ.
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO keyed VALUES (1, 'a', 10), (2, 'b', 20)"))
        c.execute(sa.text("UPDATE keyed SET v = v + 1 WHERE id = 1"))
        say("own_writes", *[f"{r[0]}:{r[1]}" for r in c.execute(sa.text("SELECT id, v FROM keyed ORDER BY id"))])
        nested = c.begin_nested()
        try:
            c.execute(sa.text("INSERT INTO keyed VALUES (3, 'a', 30)"))
            nested.commit()
            say("nested", "committed")
        except sa.exc.IntegrityError as e:
            nested.rollback()
            say("nested", "rolled_back", e.orig.sqlstate)
        c.execute(sa.text("INSERT INTO keyed VALUES (3, 'c', 30)"))
    with engine.connect() as c:
        say("after_nested", *[f"{r[0]}:{r[1]}:{r[2]}" for r in c.execute(sa.text("SELECT id, code, v FROM keyed ORDER BY id"))])
    repeatable = engine.execution_options(isolation_level="REPEATABLE READ")
    with repeatable.connect() as c:
        say("isolation", c.get_isolation_level(), c.execute(sa.text("SELECT count(*) FROM keyed")).scalar_one())
        c.commit()

    orm(engine)


def orm(engine):
    """The ORM as applications use it: a declarative model whose integer primary key the
    database assigns (SQLAlchemy creates it SERIAL and reads the keys back with INSERT …
    RETURNING, several rows per statement), a server default, an update and a delete by
    the unit of work."""
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = "items"
        id: Mapped[int] = mapped_column(primary_key=True)
        name: Mapped[str] = mapped_column(sa.String(40))
        qty: Mapped[int] = mapped_column(server_default=sa.text("5"))

    Base.metadata.create_all(engine)
    with Session(engine) as session:
        one = Item(name="one")
        session.add(one)
        session.flush()
        say("orm_flush_id", one.id)
        many = [Item(name=f"n{i}") for i in range(4)]
        session.add_all(many)
        session.commit()
        say("orm_ids", *[m.id for m in many])
        say("orm_server_default", one.qty)
        one.name = "uno"
        session.delete(many[0])
        session.commit()
    with Session(engine) as session:
        say("orm_rows", *[f"{i.id}:{i.name}:{i.qty}" for i in session.scalars(sa.select(Item).order_by(Item.id))])
    # The table reflected back: its defaults as the database keeps them (pg_attrdef).
    columns = {c["name"]: c for c in sa.inspect(engine).get_columns("items")}
    say("reflected_defaults", columns["id"]["default"], columns["id"]["autoincrement"], columns["qty"]["default"], columns["name"]["default"])
    identity_and_sequences(engine)


def identity_and_sequences(engine):
    """An identity column and a sequence as SQLAlchemy makes and reflects them: keys drawn
    by the identity (read back by RETURNING and by currval of pg_get_serial_sequence), its
    options reflected (pg_sequence, as a json object), the database's sequences listed,
    and a Sequence object's next_value."""
    md = sa.MetaData()
    ident = sa.Table("ident", md, sa.Column("id", sa.Integer, sa.Identity(start=10, increment=5), primary_key=True), sa.Column("v", sa.String(20)))
    md.create_all(engine)
    with engine.begin() as c:
        say("identity_ids", *[r[0] for r in c.execute(ident.insert().returning(ident.c.id), [{"v": "a"}, {"v": "b"}])])
        say("identity_currval", c.execute(sa.text("SELECT currval(pg_get_serial_sequence('ident', 'id'))")).scalar_one())
    inspector = sa.inspect(engine)
    column = {c["name"]: c for c in inspector.get_columns("ident")}["id"]
    identity = column.get("identity") or {}
    say("identity_options", *[f"{k}={identity[k]}" for k in sorted(identity)])
    say("identity_default", column["default"], column["autoincrement"])
    reflected = sa.Table("ident", sa.MetaData(), autoload_with=engine)
    say("identity_reflected", reflected.c.id.identity is not None and reflected.c.id.identity.start)
    sequence = sa.Sequence("counter", start=3, metadata=md)
    sequence.create(engine, checkfirst=True)
    with engine.begin() as c:
        say("sequence_next", c.execute(sequence.next_value()).scalar_one(), c.execute(sequence.next_value()).scalar_one())
    say("sequences", *sorted(sa.inspect(engine).get_sequence_names()), sa.inspect(engine).has_sequence("counter"))
    sequence.drop(engine)
    say("sequence_dropped", sa.inspect(engine).has_sequence("counter"))


if __name__ == "__main__":
    main()
