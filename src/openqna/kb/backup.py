"""``openqna backup DEST``: a consistent copy of the embedded store, taken while servers use it.

Copying ``openqna.sqlite3`` with ``cp`` while a server writes can catch a page half-written or miss what its WAL
file still holds; SQLite's online backup (``store.sqlite.backup_file``) copies one consistent snapshot, page by page,
without stopping anyone, and the copy is checked (``PRAGMA integrity_check``) before it takes its final name.  Beside
the database, ``secret.key`` (the key that encrypts connected tables' passwords, ``kb/connected_search.py``) is
copied, since the passwords in the copy are unreadable without it; the ``indexes`` cache is not (it is rebuilt on
first use).  A backup never overwrites a store.  A PostgreSQL store is backed up by PostgreSQL's own tools, or copied
into a folder with ``openqna migrate``.

``openqna restore BACKUP``: the backup served in place of a store (serving the backup's own folder,
``OPENQNA_DATA=DEST``, is the other way).  Copying ``openqna.sqlite3`` back by hand is not: a server that was killed
leaves its WAL (``-wal``, ``-shm``) beside the file, and SQLite applies it to whatever file has the name, so the
"restored" store held the later writes, or was "database disk image is malformed".  ``restore`` refuses while any
process has the store open (``store.sqlite.in_use``), deletes the WAL with the old file, restores ``secret.key``,
and drops the ``indexes`` cache, whose versions are the replaced store's.
"""

from __future__ import annotations

import errno
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from openqna import settings
from openqna.kb.catalog import STORE_FILE, check_location, embedded_dir, is_postgres, no_store_message, store_file
from openqna.records import Conflict, InvalidArgument, NotFound, StoreFull
from openqna.store.sqlite import SQLiteStore, backup_file, in_use, remove_database

SECRET_FILE = "secret.key"


@dataclass
class BackupReport:
    path: Path
    bytes: int
    projects: int
    records: int
    keys: int
    secret_key: bool
    seconds: float


def _counts(folder: Path) -> tuple[int, int, int]:
    """(projects, records, keys) of the store in ``folder``."""
    store = SQLiteStore(folder)
    try:
        projects = store.list_projects()
        return len(projects), sum(store.count_qnas(p.name) for p in projects), len(store.list_keys())
    finally:
        store.close()


def backup(data_dir: str, dest: str | Path) -> BackupReport:
    """Copy the store in ``data_dir`` (and its secret key) into the folder ``dest``, which must hold no store."""
    started = time.perf_counter()
    check_location(settings.store(), "OPENQNA_STORE")
    if is_postgres(settings.store()):
        raise InvalidArgument("the store is PostgreSQL (OPENQNA_STORE): back it up with PostgreSQL's own tools "
                              "(pg_dump), or copy it into a folder with `openqna migrate --from URL --to FOLDER`")
    data_dir = embedded_dir(data_dir)  # OPENQNA_STORE may name the store's folder
    source = store_file(data_dir)
    if not source.exists():
        raise NotFound(no_store_message(data_dir))
    folder = Path(dest).absolute()
    target = folder / STORE_FILE
    if folder == source.parent:
        raise InvalidArgument(f"{folder} is the store's own folder: name another one for the backup")
    if target.exists():
        raise InvalidArgument(f"{target} exists: a backup never overwrites a store; name an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / (STORE_FILE + ".partial")
    secret, copied = source.parent / SECRET_FILE, folder / SECRET_FILE
    try:  # the store takes its name last: a backup that failed (a full disk) leaves nothing of it behind
        backup_file(source, partial)
        if secret.exists():
            shutil.copyfile(secret, copied)
            copied.chmod(0o600)
        partial.replace(target)
    except OSError as exc:
        remove_database(partial)
        if secret.exists():
            copied.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise StoreFull(f"the disk is full: the backup could not be written to {folder} ({exc.strerror}); "
                            "nothing of it was kept. Free space there and try again.") from exc
        raise
    projects, records, keys = _counts(folder)
    return BackupReport(target, target.stat().st_size, projects, records, keys, secret.exists(),
                        round(time.perf_counter() - started, 2))


def restore(backup_dir: str | Path, data_dir: str) -> BackupReport:
    """Put the store backed up in the folder ``backup_dir`` in place of the store in ``data_dir`` (made if there is
    none), with its secret key; ``Conflict`` while a process has that store open, with nothing changed."""
    started = time.perf_counter()
    check_location(settings.store(), "OPENQNA_STORE")
    if is_postgres(settings.store()):
        raise InvalidArgument("the store is PostgreSQL (OPENQNA_STORE): restore it with PostgreSQL's own tools "
                              "(pg_restore), or copy a folder into it with `openqna migrate --from FOLDER --to URL`")
    folder = Path(embedded_dir(data_dir)).absolute()
    source = Path(backup_dir).absolute() / STORE_FILE
    target = folder / STORE_FILE
    if not source.exists():
        raise NotFound(f"no backup in {source.parent} (looked for {source}); name the folder `openqna backup` wrote")
    if source.parent == folder:
        raise InvalidArgument(f"{folder} is the store's own folder: name the folder of a backup")

    def refuse_in_use() -> None:
        if in_use(target):
            raise Conflict(f"the store in {folder} is open in another process (a server, or another openqna "
                           "command): stop it first; nothing was changed")

    refuse_in_use()
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / (STORE_FILE + ".partial")
    try:
        backup_file(source, partial)  # through SQLite: the backup's own WAL, if it was served, is read with it
        refuse_in_use()  # a server started meanwhile
        remove_database(target, keep_file=True)  # the old WAL, which SQLite would apply to the restored file
        partial.replace(target)
    except BaseException as exc:
        remove_database(partial)
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise StoreFull(f"the disk is full: the backup could not be restored to {folder} ({exc.strerror}); "
                            "the store there is unchanged. Free space there and try again.") from exc
        raise
    secret = source.parent / SECRET_FILE
    if secret.exists():  # the passwords in the restored store are encrypted with the backup's key
        copied = folder / SECRET_FILE
        copied.unlink(missing_ok=True)
        shutil.copyfile(secret, copied)
        copied.chmod(0o600)
    shutil.rmtree(folder / "indexes", ignore_errors=True)  # saved under the replaced store's versions
    projects, records, keys = _counts(folder)
    return BackupReport(target, target.stat().st_size, projects, records, keys, secret.exists(),
                        round(time.perf_counter() - started, 2))
