"""Walking a local directory tree, in this process or in a child process beside the scanner.

The walk (a readdir per directory, an lstat and a tuple per file) and the scanner's
SQLite writes both hold the GIL, so in one process they take turns (a producer thread
made the scan slower). `WalkProcess` runs the walk in a child Python process (`python -m
governance.storage.local_walk`) that streams batches of rows through a pipe, so the walk
and the writes run on two cores. The pipe's buffer bounds memory: a child ahead of the
scanner blocks on its next write. The child is in its own session, so a Ctrl-C reaches
only the scanner, which stops the child; if the scanner dies, the child's next write
fails and it exits.

Rows are `(key, size, "mtime:<ns>", µs)`: the mtime token stands in for an ETag on disk.
Symbolic links are neither followed nor listed; a walk asked to (`Symlinks`) counts them
and notes those that resolve inside the root, with their targets, which the scanner keeps
so that plans leave what a link points at alone. The child sends them after the last
batch of rows, so the rows' path is the same with links or without.

A file or folder whose name is not valid UTF-8 (a legacy Latin-1 name: Python hands it
over with surrogate escapes, which no catalog can store) is passed over the same way:
neither listed nor entered, and counted (`Symlinks.unreadable_names`). Only a name that is
not ASCII is encoded to find out, so the common case costs one `isascii()` per entry. A
link with such a name is a link: counted as one, and noted under its name with the bad
bytes escaped (`\\xe9`), so that what it points at is still kept.
"""

from __future__ import annotations

import contextlib
import errno
import json
import marshal
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from governance.errors import AccessDeniedError, NoSuchRootError, StorageError
from governance.storage.base import CompactRow, Symlinks

BATCH_ROWS = 2000
"""Rows per message: large enough that framing and wake-ups cost nothing per row."""
_HEADER = struct.Struct("<Q")
_PIPE_BYTES = 1 << 20
"""Pipe capacity asked for (Linux): fewer wake-ups; the child stays at most this far ahead."""
LINK_BATCH = 20_000
"""Links per message (after the rows): a tree of links (a Hugging Face cache is one per
file) must not become one huge message."""
_ERRORS: dict[str, type[StorageError]] = {
    cls.__name__: cls for cls in (StorageError, NoSuchRootError, AccessDeniedError)
}


def walk_tree(
    base: str, url: str, excludes: tuple[str, ...], symlinks: Symlinks | None = None
) -> Iterator[CompactRow]:
    """Depth-first scandir walk of `base` (ending in '/') yielding compact rows.

    Excluded subtrees are never entered. The per-file work is one lstat and one tuple:
    this loop is the local scan's hot path. Raises NoSuchRootError / AccessDeniedError
    naming `url`; a file or directory removed while the walk runs is skipped. Symbolic
    links are not yielded; with `symlinks` given, each one met outside the excluded
    prefixes is counted there, and noted with its target when that lies inside the root
    (`note_link`): work for links only, none per file. Nor are files whose names are not
    valid UTF-8, nor folders so named entered: with `symlinks` given, they are counted
    there too (`pass_over`).
    """
    real_root = os.path.realpath(base) if symlinks is not None else ""
    stack = [("", base)]
    while stack:
        rel, directory = stack.pop()
        relevant = tuple(e for e in excludes if e.startswith(rel)) if excludes else ()
        try:
            entries = os.scandir(directory)
        except FileNotFoundError:
            if rel:
                continue  # removed while we walked: nothing left to list
            raise NoSuchRootError(url, "does not exist") from None
        except NotADirectoryError:
            if rel:
                continue
            raise NoSuchRootError(url, "is not a directory") from None
        except PermissionError as exc:
            raise AccessDeniedError(url, f"cannot read {rel or '.'} ({exc})") from exc
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                raise
            # the error's own text repeats the whole path (kilobytes of it): named short
            raise StorageError(
                url,
                f"cannot read {_shortened(rel)}: its path is {len(directory):,} characters, "
                "over the system's limit (move or rename its folders to list it)",
            ) from None
        with entries:
            for entry in entries:
                name = entry.name
                if not name.isascii() and not readable_name(name):
                    if symlinks is not None:
                        pass_over(entry, rel + name, relevant, symlinks, real_root)
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        sub = rel + name + "/"
                        if not (relevant and sub.startswith(relevant)):
                            stack.append((sub, entry.path + "/"))
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        if symlinks is not None and entry.is_symlink():
                            key = rel + name
                            if not (relevant and key.startswith(relevant)):
                                note_link(symlinks, key, entry.path, real_root)
                        continue  # symlinks, sockets, fifos
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed between readdir and stat
                key = rel + name
                if relevant and key.startswith(relevant):
                    continue
                ns = st.st_mtime_ns
                yield (key, st.st_size, f"mtime:{ns}", ns // 1000)


def _shortened(rel: str, keep: int = 60) -> str:
    """A long relative path as its start and end: `a/b/c/…/x/y/`."""
    return rel if len(rel) <= 2 * keep else f"{rel[:keep]}…{rel[-keep:]}"


def readable_name(name: str) -> bool:
    """Whether a name read from the filesystem is valid UTF-8, so that a key holding it
    can be stored and shown (a name that is not comes with surrogate escapes, which
    encoding refuses). The walk asks only for names that are not ASCII."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def shown_key(key: str) -> str:
    """`key` with the bytes of any name that is not valid UTF-8 written as `\\xe9`
    escapes: a string the catalog can hold and a message can show."""
    return os.fsencode(key).decode("utf-8", "backslashreplace")


def pass_over(
    entry: os.DirEntry[str], key: str, relevant: tuple[str, ...], symlinks: Symlinks, real_root: str
) -> None:
    """Account for an entry whose name is not valid UTF-8 (`key` under the root, surrogate
    escapes and all) unless it lies under an excluded prefix (`relevant`): a file or a
    folder (which is not entered) is counted in `unreadable_names`; a link is a link
    (`note_link`); anything else (a socket, a FIFO) is skipped as under any name."""
    try:
        if entry.is_symlink():
            if not (relevant and key.startswith(relevant)):
                note_link(symlinks, key, entry.path, real_root)
            return
        if entry.is_dir(follow_symlinks=False):
            key += "/"
        elif not entry.is_file(follow_symlinks=False):
            return  # a socket, a FIFO, a device
    except FileNotFoundError:
        return  # removed since the readdir
    if not (relevant and key.startswith(relevant)):
        symlinks.unreadable_names += 1


def note_link(symlinks: Symlinks, key: str, path: str, real_root: str) -> None:
    """Count the link at `path` (`key` under the root) and, when it resolves (through any
    chain of links) to a file or folder inside the root (`real_root`, resolved), note
    (key, target key), a folder's ending in '/' and the root itself ''. A dangling link,
    a loop or a target that cannot be reached is counted and nothing more; so is one
    whose target's path under the root is not valid UTF-8 (a target no scan lists). A
    link whose own name is not valid UTF-8 is noted under `shown_key(key)`."""
    symlinks.count += 1
    try:
        target = os.path.realpath(path, strict=True)
        folder = os.path.isdir(target)
    except (OSError, ValueError):
        return  # dangling, a loop, or a part of the way not readable
    if target == real_root:
        symlinks.inside.append((key, ""))
        return
    prefix = real_root.rstrip(os.sep) + os.sep
    if not target.startswith(prefix):
        return  # outside the root: nothing of the root's to keep
    relative = target[len(prefix) :].replace(os.sep, "/")
    if not relative.isascii() and not readable_name(relative):
        return  # a target whose name is not UTF-8: not listed, nothing to keep
    if not key.isascii() and not readable_name(key):
        key = shown_key(key)
    symlinks.inside.append((key, relative + "/" if folder else relative))


class TreeWalk:
    """`walk_tree`'s rows walked in this process, with the links met (`symlinks`, whole
    once the rows are consumed). Iterating it iterates the walk itself: no frame per row."""

    __slots__ = ("_rows", "symlinks")

    def __init__(self, rows: Iterator[CompactRow], symlinks: Symlinks) -> None:
        self._rows = rows
        self.symlinks = symlinks

    def __iter__(self) -> Iterator[CompactRow]:
        return self._rows

    def __next__(self) -> CompactRow:
        return next(self._rows)

    def close(self) -> None:
        close = getattr(self._rows, "close", None)
        if close is not None:
            close()


def can_walk_beside() -> bool:
    """A child walker pays off only with a second CPU to run it on."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return cpus > 1


class WalkProcess:
    """The rows of `walk_tree(base, url, excludes)`, walked by a child process.

    Iterate it once, then `close()` (always; safe more than once): closing early stops the
    child. Errors the child meets are raised here as the same StorageError it met. The
    links the child met are in `symlinks` once the rows are consumed.
    """

    def __init__(self, base: str, url: str, excludes: tuple[str, ...]) -> None:
        self.url = url
        package_parent = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_parent, env.get("PYTHONPATH", "")) if p
        )
        request = json.dumps({"base": base, "url": url, "excludes": list(excludes)})
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, request],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # a terminal's Ctrl-C goes to the scanner, not here
        )
        assert self._proc.stdout is not None
        self._out: IO[bytes] = self._proc.stdout
        self.symlinks = Symlinks()
        _widen_pipe(self._out.fileno())
        self._rows: Iterator[CompactRow] = self._receive()

    def __iter__(self) -> Iterator[CompactRow]:
        return self._rows

    def __next__(self) -> CompactRow:
        return next(self._rows)

    def _receive(self) -> Iterator[CompactRow]:
        read = self._out.read
        while True:
            header = read(_HEADER.size)
            size = _HEADER.unpack(header)[0] if len(header) == _HEADER.size else -1
            body = read(size) if size > 0 else b""
            if size <= 0 or len(body) != size:  # cut short: the child is gone
                code = self._proc.wait()
                raise StorageError(self.url, f"the walking process stopped early (exit {code})")
            message = marshal.loads(body)
            if message is None:
                return
            if isinstance(message, tuple):  # (error class name, message without the URL)
                name, detail = message
                raise _ERRORS.get(name, StorageError)(self.url, detail)
            if isinstance(message, dict):  # links and unreadable names, after the rows
                self.symlinks.count += message["count"]
                self.symlinks.unreadable_names += message["unreadable_names"]
                self.symlinks.inside += message["inside"]
                continue
            yield from message

    def close(self) -> None:
        """Stop the child if it still runs, and reap it."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._out.close()


def _widen_pipe(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # not POSIX
        return
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if set_size is None:
        return
    with contextlib.suppress(OSError):  # over the system's limit: the default size works
        fcntl.fcntl(fd, set_size, _PIPE_BYTES)


Message = list[CompactRow] | dict[str, Any] | tuple[str, str] | None


def _send(out: IO[bytes], message: Message) -> None:
    data = marshal.dumps(message)
    out.write(_HEADER.pack(len(data)))
    out.write(data)


def serve(base: str, url: str, excludes: tuple[str, ...], out: IO[bytes]) -> None:
    """The child's side: walk and write framed marshal messages (row batches; then, when
    the walk met links or names that are not UTF-8, `{"count": n, "unreadable_names": m,
    "inside": [(link, target), ...]}` in one or more messages, the counts given in the
    first; then None; or an error as (class name, message))."""
    from governance.storage.errors import translate

    batch: list[CompactRow] = []
    links = Symlinks()
    try:
        for row in walk_tree(base, url, excludes, links):
            batch.append(row)
            if len(batch) == BATCH_ROWS:
                _send(out, batch)
                batch = []
        if batch:
            _send(out, batch)
        if links.count or links.unreadable_names:
            inside, count, unreadable = links.inside, links.count, links.unreadable_names
            for start in range(0, max(len(inside), 1), LINK_BATCH):
                part = inside[start : start + LINK_BATCH]
                _send(out, {"count": count, "unreadable_names": unreadable, "inside": part})
                count = unreadable = 0
        _send(out, None)
    except Exception as exc:
        error = exc if isinstance(exc, StorageError) else translate(url, exc)
        prefix = f"{url}: "
        text = str(error)
        _send(out, (type(error).__name__, text.removeprefix(prefix)))
    out.flush()


def main(argv: list[str]) -> int:
    """`python -m governance.storage.local_walk '{"base": ..., "url": ..., "excludes": [...]}'`."""
    request = json.loads(argv[0])
    out = os.fdopen(sys.stdout.fileno(), "wb", buffering=1 << 16, closefd=False)
    try:
        serve(request["base"], request["url"], tuple(request["excludes"]), out)
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(1)  # the scanner is gone or stopping: nobody reads the rest, nothing to flush
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
