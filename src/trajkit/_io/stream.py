"""Bounded reads of one ZIP member's uncompressed bytes, straight from the file.

Stored members are read as they are; deflated members are inflated with a hard cap: never more
output than asked for, never past the size the ZIP directory declares, so that a deflate bomb
costs neither memory nor time.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Callable
from typing import NoReturn

from trajkit._io.crc import crc32

__all__ = ["IO_CHUNK", "MemberStream"]

IO_CHUNK = 1 << 18  # bytes per read: small enough that the CRC reads them from the cache


class MemberStream:
    """Bounded reads of one member's uncompressed bytes, straight from the file.

    `finish` checks that exactly the declared bytes were produced, that a deflate stream ends
    exactly there (more output means a bomb or damage), and the CRC-32. Refusals go through
    `fail(message)`, which raises.

    Examples:
        >>> import io, zipfile
        >>> blob = io.BytesIO()
        >>> with zipfile.ZipFile(blob, "w", zipfile.ZIP_DEFLATED) as archive:
        ...     archive.writestr("zeros", bytes(1 << 20))
        >>> with zipfile.ZipFile(blob) as archive:
        ...     info = archive.infolist()[0]
        >>> def fail(message: str) -> NoReturn:
        ...     raise ValueError(message)
        >>> stream = MemberStream(blob, info, 30 + len("zeros"), fail, check_crc=True)
        >>> len(stream.read(1 << 20)), stream.finish()
        (1048576, None)
    """

    def __init__(
        self,
        file: io.BufferedIOBase,
        info: zipfile.ZipInfo,
        start: int,
        fail: Callable[[str], NoReturn],
        *,
        check_crc: bool,
    ) -> None:
        self._file = file
        self._info = info
        self._fail = fail
        self._pos = start  # next compressed byte to read from the file
        self._left_in = info.compress_size
        self._left_out = info.file_size
        self._check_crc = check_crc
        self.crc = 0
        self._inflate = (
            zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
        )
        self._tail = b""  # compressed input not consumed yet

    def _raw(self, n: int) -> bytes:
        self._file.seek(self._pos)
        data = self._file.read(min(n, self._left_in))
        self._pos += len(data)
        self._left_in -= len(data)
        return data

    def _inflate_some(self, limit: int) -> bytes:
        """At most `limit` (> 0) more bytes of output; empty only when no more can come.

        zlib can hold output it has not given yet after consuming all its input (the rest of
        a long match, when the output cap cut it): it is asked again, with no new input,
        before more input is read, and only an empty answer with no input left ends the
        stream here.
        """
        inflate = self._inflate
        if inflate is None:  # pragma: no cover - only called for deflated members
            raise ValueError("a stored member is not inflated")
        while not inflate.eof:
            if not self._tail and self._left_in:
                self._tail = self._raw(IO_CHUNK)
            piece = inflate.decompress(self._tail, limit)
            self._tail = inflate.unconsumed_tail
            if piece:
                return piece
            if not self._tail and not self._left_in:
                break  # no output, no input left: the compressed data ends early
        return b""

    def readinto(self, buffer: memoryview) -> int:
        """Fill a prefix of `buffer` (never past the declared size); 0 at the end.

        Stored data goes straight from the file into `buffer`; deflated data is inflated
        straight into it, at most `len(buffer)` bytes.
        """
        n = min(len(buffer), self._left_out)
        if n <= 0:
            return 0
        if self._inflate is None:
            self._file.seek(self._pos)
            count = self._file.readinto(buffer[: min(n, self._left_in)])
            self._pos += count
            self._left_in -= count
        else:
            count = 0
            while count < n:
                piece = self._inflate_some(n - count)
                if not piece:
                    break
                buffer[count : count + len(piece)] = piece
                count += len(piece)
        self._left_out -= count
        if self._check_crc:
            self.crc = crc32(buffer[:count], self.crc)
        return count

    def read(self, n: int) -> bytearray:
        """Read `n` bytes, fewer only where the member ends.

        The buffer grows as bytes arrive, `IO_CHUNK` at a time: memory follows what the
        member really holds, never what its header declares.
        """
        out = bytearray()
        while len(out) < n and self._left_out:
            piece = bytearray(min(n - len(out), IO_CHUNK, self._left_out))
            got = self.readinto(memoryview(piece))
            if not got:
                break
            del piece[got:]
            out += piece
        return out

    def finish(self) -> None:
        """Check the member ended exactly where declared, and its CRC-32."""
        if self._left_out:
            self._fail(f"truncated: {self._left_out} bytes of the member missing")
        if self._inflate is not None:
            if self._inflate_some(1):
                self._fail(
                    f"inflates to more than the declared {self._info.file_size} bytes "
                    "(a deflate bomb, or damaged data)"
                )
            if not self._inflate.eof:
                self._fail("truncated: the compressed data ends early")
            if self._tail or self._inflate.unused_data or self._left_in:
                self._fail("has bytes after the end of its compressed data")
        if self._check_crc and self.crc != self._info.CRC:
            self._fail("CRC-32 mismatch: the data is damaged")
