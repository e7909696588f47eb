"""Figures of the whole catalogue, computed once per version of the catalogue.

The database counts its changes: migration 0004 adds the one-row table
``catalogue_version`` and triggers that add one to it in the same transaction as every
write to movies, reviews, predictions or explanations, so a reader that sees the new count
sees the new rows too. A figure that takes a pass over the whole catalogue (the dashboard's
title figures and summary, /about's explanation quality, the list of disagreements) is
computed by the database once and kept, per engine, with the count it was computed at; a
request then pays one primary-key read until the count moves. Each server process keeps
its own, all checked against the same count. A database built before migration 0004 has
no count: its figures are computed on every request.

The kept values are shared between requests: callers never change them.
"""

from collections.abc import Callable, Hashable
from typing import TypeVar
from weakref import WeakKeyDictionary

from sqlalchemy import inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.db import CatalogueVersion

Value = TypeVar("Value")
COUNTED = "counted"  # whether the engine's database has the count, checked once
_kept: WeakKeyDictionary[Engine, dict] = WeakKeyDictionary()


def catalogue_version(session: Session) -> int | None:
    """The database's count of catalogue changes, or None when it keeps none."""
    kept = _store(session)
    if not kept[COUNTED]:
        return None
    return session.scalar(select(CatalogueVersion.version).where(CatalogueVersion.id == 1))


def kept(session: Session, key: Hashable, compute: Callable[[], Value]) -> Value:
    """``compute()``, reused while the catalogue is unchanged since it was computed."""
    version = catalogue_version(session)
    if version is None:
        return compute()
    store = _store(session)
    found = store.get(key)
    if found is not None and found[0] == version:
        return found[1]
    value = compute()
    store[key] = (version, value)
    return value


def _store(session: Session) -> dict:
    engine = session.get_bind()
    store = _kept.get(engine)
    if store is None:
        store = _kept[engine] = {COUNTED: inspect(engine).has_table(CatalogueVersion.__tablename__)}
    return store
