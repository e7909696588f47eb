"""Alembic environment: runs the migrations on the connection textflix hands over."""

from alembic import context

from app.db import Base, make_engine

config = context.config
connection = config.attributes.get("connection")


def run(conn) -> None:
    context.configure(connection=conn, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if connection is not None:
    run(connection)
else:  # the alembic command line, with sqlalchemy.url set in its config
    with make_engine(config.get_main_option("sqlalchemy.url")).connect() as conn:
        run(conn)
