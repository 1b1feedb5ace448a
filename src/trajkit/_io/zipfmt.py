"""The ZIP layout of a rollout file: member entries, local headers, the end record.

A rollout file is a ZIP archive as `zipfile` writes it, with a fixed timestamp, the ZIP64
extra field on every `.npy` member, and padding (the "Android zipalign" extra field) so that
stored array data starts at a multiple of 64 bytes. The checks here raise `ValueError` with a
message; the reader turns them into `RolloutFileError`s naming the file and member.
"""

from __future__ import annotations

import stat
import struct
import zipfile
from typing import IO

__all__ = [
    "ALIGN",
    "LOCAL_HEADER",
    "METHODS",
    "align_extra",
    "check_end",
    "check_entry",
    "data_start",
    "zip_info",
]

ALIGN = 64  # stored array data starts at a multiple of this offset in the file
_ALIGN_EXTRA_ID = 0xD935  # the "Android zipalign" extra field, used as padding
ZIP64_EXTRA_LEN = 20  # the ZIP64 extra field zipfile writes with force_zip64
LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
END_RECORD = struct.Struct("<4s4H2LH")  # end of central directory, then a comment
END_SIGNATURE = b"PK\x05\x06"
_END64_LOCATOR = struct.Struct("<4sLQL")  # just before the end record, when ZIP64 is used
_END64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_END64_RECORD = struct.Struct("<4sQ2H2L4Q")  # the ZIP64 end of central directory record
_END64_SIGNATURE = b"PK\x06\x06"
DATE_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so that equal rollouts give identical files
METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


def zip_info(name: str, compress: bool) -> zipfile.ZipInfo:
    """The entry of a member as `save` writes it: fixed date, mode 0o644, stored or deflated.

    Examples:
        >>> info = zip_info("rews.npy", compress=True)
        >>> info.date_time, info.compress_type == zipfile.ZIP_DEFLATED
        ((1980, 1, 1, 0, 0, 0), True)
    """
    info = zipfile.ZipInfo(name, date_time=DATE_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    return info


def align_extra(offset: int, name: str, header_len: int) -> bytes:
    """The padding extra field that makes a stored member's array data start aligned.

    `offset` is where the member's local header starts; the data follows the local header,
    the name, the ZIP64 extra field, this field and a `.npy` header of `header_len` bytes.

    Examples:
        >>> extra = align_extra(0, "rews.npy", 128)
        >>> (30 + len("rews.npy") + 20 + len(extra) + 128) % 64
        0
    """
    start = offset + LOCAL_HEADER.size + len(name.encode()) + ZIP64_EXTRA_LEN
    pad = (-(start + header_len)) % ALIGN
    if pad < 6:
        pad += ALIGN
    return struct.pack("<HHH", _ALIGN_EXTRA_ID, pad - 4, ALIGN) + bytes(pad - 6)


def check_entry(info: zipfile.ZipInfo) -> None:
    """Refuse a central directory entry the format does not allow (`ValueError`).

    Examples:
        >>> info = zip_info("rews.npy", compress=False)
        >>> info.compress_size, info.file_size = 10, 12
        >>> check_entry(info)
        Traceback (most recent call last):
        ...
        ValueError: a stored member with compressed size 10 != size 12
    """
    if info.orig_filename != info.filename:  # zipfile cuts a name at a NUL byte
        raise ValueError(f"the member name {info.orig_filename!r} holds a NUL byte")
    if info.flag_bits & 0x1:
        raise ValueError("the member is encrypted")
    if info.compress_type not in METHODS:
        raise ValueError(
            f"compression method {info.compress_type} is not allowed (only stored and deflated)"
        )
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise ValueError(
            f"a stored member with compressed size {info.compress_size} != size {info.file_size}"
        )


def check_end(file: IO[bytes], size: int, entries: int) -> None:
    """Check the end of central directory record, which `zipfile` has read already.

    The file ends with the record and its comment, exactly (`zipfile` takes the last record
    signature in the last 64 KiB and ignores what follows its comment); the record (and the
    ZIP64 record, where there is one) names disk 0 only and counts `entries` entries, on this
    disk and in all (`zipfile` reads the directory by its size and ignores both). A field the
    ZIP64 record holds may read all ones (0xFFFF) in the plain record.

    Raises:
        ValueError: Naming what is wrong.
    """
    tail_size = min(size, END_RECORD.size)
    file.seek(size - tail_size)
    tail = file.read(tail_size)
    if tail.startswith(END_SIGNATURE) and tail.endswith(b"\0\0"):
        at = size - END_RECORD.size  # no comment: as save writes it
        record = tail
    else:
        tail_size = min(size, END_RECORD.size + 0xFFFF)
        file.seek(size - tail_size)
        tail = file.read(tail_size)
        found = tail.rfind(END_SIGNATURE)
        if found < 0 or found + END_RECORD.size > len(tail):  # pragma: no cover - zipfile refused
            raise ValueError("no end of central directory record")
        comment_size = END_RECORD.unpack_from(tail, found)[-1]
        extra = len(tail) - (found + END_RECORD.size + comment_size)
        if extra:
            raise ValueError(
                f"{extra} bytes after the end of the ZIP archive (its end of central directory "
                "record and comment)"
                if extra > 0
                else "the end of central directory record's comment runs past the end of the file"
            )
        at = size - tail_size + found
        record = tail[found : found + END_RECORD.size]
    _, disk, cd_disk, here, total, _, _, _ = END_RECORD.unpack(record)
    zip64 = _read_end64(file, at)
    if zip64 is not None:
        disk64, cd_disk64, here64, total64 = zip64
        record64 = "ZIP64 end of central directory record"
        _check_end_fields(record64, disk64, cd_disk64, here64, total64, entries)
    for name, value, limit in (
        ("disk number", disk, 0),
        ("central directory disk", cd_disk, 0),
        ("entry count on this disk", here, min(entries, 0xFFFF)),
        ("entry count", total, min(entries, 0xFFFF)),
    ):
        if value != limit and not (zip64 is not None and value == 0xFFFF):
            _end_field_error("end of central directory record", name, value, limit, entries)


def _read_end64(file: IO[bytes], at: int) -> tuple[int, int, int, int] | None:
    """The ZIP64 record's disks and counts, if a ZIP64 locator precedes the end record at `at`."""
    if at < _END64_LOCATOR.size + _END64_RECORD.size:
        return None
    file.seek(at - _END64_LOCATOR.size)
    signature, locator_disk, _, disks = _END64_LOCATOR.unpack(file.read(_END64_LOCATOR.size))
    if signature != _END64_LOCATOR_SIGNATURE:
        return None
    if locator_disk != 0 or disks != 1:
        raise ValueError(
            f"the ZIP64 end of central directory locator names disk {locator_disk} of {disks}; "
            "a rollout file is one disk"
        )
    file.seek(at - _END64_LOCATOR.size - _END64_RECORD.size)
    fields = _END64_RECORD.unpack(file.read(_END64_RECORD.size))
    if fields[0] != _END64_SIGNATURE:  # pragma: no cover - zipfile would have refused it
        raise ValueError("the ZIP64 end of central directory record is missing")
    disk, cd_disk, here, total = fields[4:8]
    return disk, cd_disk, here, total


def _check_end_fields(
    record: str, disk: int, cd_disk: int, here: int, total: int, entries: int
) -> None:
    for name, value, expected in (
        ("disk number", disk, 0),
        ("central directory disk", cd_disk, 0),
        ("entry count on this disk", here, entries),
        ("entry count", total, entries),
    ):
        if value != expected:
            _end_field_error(record, name, value, expected, entries)


_DISK_FIELDS = ("disk number", "central directory disk")


def _end_field_error(record: str, name: str, value: int, expected: int, entries: int) -> None:
    if name in _DISK_FIELDS:
        raise ValueError(f"the {record}'s {name} is {value}, not 0: a rollout file is one disk")
    raise ValueError(
        f"the {record}'s {name} is {value}, but the central directory holds {entries} "
        f"entries (expected {expected})"
    )


def data_start(file: IO[bytes], info: zipfile.ZipInfo, size: int) -> int:
    """Check a member's local header against its directory entry; return where its data starts.

    Raises:
        ValueError: If the header is cut off or disagrees with the entry, or the member's data
            runs past the end of the file (`size` bytes).
    """
    file.seek(info.header_offset)
    raw = file.read(LOCAL_HEADER.size)
    if len(raw) != LOCAL_HEADER.size:
        raise ValueError("truncated: the local header is cut off")
    sig, _, flags, method, _, _, _, _, _, name_len, extra_len = LOCAL_HEADER.unpack(raw)
    local_name = file.read(name_len)
    if (
        sig != _LOCAL_SIGNATURE
        or local_name != info.orig_filename.encode("utf-8")
        or flags & 0x1
        or method != info.compress_type
    ):
        raise ValueError("the local header does not match the central directory")
    start: int = info.header_offset + LOCAL_HEADER.size + name_len + extra_len
    if start + info.compress_size > size:
        raise ValueError("truncated: the member's data runs past the end of the file")
    return start
