"""``openqna backup DEST``: a consistent copy of the embedded store, taken while servers use it.

Copying ``openqna.sqlite3`` with ``cp`` while a server writes can catch a page half-written or miss what its WAL
file still holds; SQLite's online backup (``store.sqlite.backup_file``) copies one consistent snapshot, page by page,
without stopping anyone, and the copy is checked (``PRAGMA integrity_check``) before it takes its final name.  Beside
the database, ``secret.key`` (the key that encrypts connected tables' passwords, ``kb/connected_search.py``) is
copied, since the passwords in the copy are unreadable without it; the ``indexes`` cache is not (it is rebuilt on
first use).  A backup never overwrites a store.  Restoring is serving the folder (``OPENQNA_DATA=DEST``) or copying
it back.  A PostgreSQL store is backed up by PostgreSQL's own tools, or copied into a folder with ``openqna migrate``.
"""

from __future__ import annotations

import errno
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from openqna import settings
from openqna.kb.catalog import STORE_FILE, check_location, embedded_dir, is_postgres, no_store_message, store_file
from openqna.records import InvalidArgument, NotFound, StoreFull
from openqna.store.sqlite import SQLiteStore, backup_file, remove_database

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
    store = SQLiteStore(folder)
    try:
        projects = store.list_projects()
        records = sum(store.count_qnas(p.name) for p in projects)
        keys = len(store.list_keys())
    finally:
        store.close()
    return BackupReport(target, target.stat().st_size, len(projects), records, keys, secret.exists(),
                        round(time.perf_counter() - started, 2))
