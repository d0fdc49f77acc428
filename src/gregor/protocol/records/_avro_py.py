"""The leader's walk of an Avro payload in pure Python (schema validation level ``decode``):
the readable reference of the compiled ``AvroValidator`` in ``_scan.pyx``, which must agree
with it verdict for verdict (``tests/schema_registry/test_schema_decode.py`` compares both,
and both with fastavro). ``replication.schema_decoder`` turns a parsed Avro schema into the
program of nodes described below; ``_scan_py.check_payloads`` runs it over each record.
"""

from __future__ import annotations

# --- the leader's Avro payload walk (schema validation level ``decode``) ---

# an Avro schema as a program of nodes (built by ``replication.schema_decoder``): per node a
# kind and two arguments; a union's and a record's children are ``children[a:a + b]``
AVRO_NULL = 0
AVRO_BOOLEAN = 1
AVRO_INT = 2
AVRO_LONG = 3
AVRO_FLOAT = 4
AVRO_DOUBLE = 5
AVRO_BYTES = 6  # and every string-free blob
AVRO_STRING = 7
AVRO_FIXED = 8  # a: the size
AVRO_ENUM = 9  # a: how many symbols
AVRO_UNION = 10  # children[a:a + b]: the branches
AVRO_ARRAY = 11  # a: the items' node; b: 1 if an item takes no bytes
AVRO_MAP = 12  # a: the values' node
AVRO_RECORD = 13  # children[a:a + b]: the fields' nodes
#: a datum nested deeper than this (records, unions, arrays, maps in each other) is refused
AVRO_MAX_DEPTH = 200

_AVRO_EOF = "the payload ends too early"
_INT32 = 1 << 31


class _AvroInvalid(Exception):
    pass


class AvroValidator:
    """Whether a framed payload (5 bytes of Confluent's framing, then the body) is one whole
    datum of an Avro schema given as a program of nodes: every value read as Avro's binary
    encoding reads it (varints of at most 10 bytes, ints in 32 bits, lengths within the
    payload, strings in UTF-8, enum and union indexes in range, array and map blocks, a
    negative block count followed by its size) and no byte left over. No objects are made of
    the datum; the depth is bounded (``AVRO_MAX_DEPTH``), and an array of items that take no
    bytes is not looped over (its count cannot make work)."""

    def __init__(self, kinds: list[int], a: list[int], b: list[int], children: list[int]) -> None:
        self.kinds = list(kinds)
        self.a = list(a)
        self.b = list(b)
        self.children = list(children)

    def __call__(self, payload: bytes) -> str | None:
        return self.check(payload)

    def check(self, payload: bytes) -> str | None:
        """None if the payload after its 5-byte framing is one whole datum, else why not."""
        if len(payload) < 5:
            return _AVRO_EOF
        try:
            pos = self._skip(payload, 5, 0, 0)
        except _AvroInvalid as e:
            return str(e)
        left = len(payload) - pos
        return f"{left} bytes left over after the datum" if left else None

    @staticmethod
    def _long(data: bytes, pos: int) -> tuple[int, int]:
        n = shift = 0
        end = len(data)
        for i in range(pos, pos + 10):
            if i >= end:
                raise _AvroInvalid(_AVRO_EOF)
            byte = data[i]
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                n &= (1 << 64) - 1
                return (n >> 1) ^ -(n & 1), i + 1
            shift += 7
        raise _AvroInvalid("a long takes more than 10 bytes")

    def _skip(self, data: bytes, pos: int, node: int, depth: int) -> int:
        if depth > AVRO_MAX_DEPTH:
            raise _AvroInvalid(f"the datum is nested more than {AVRO_MAX_DEPTH} levels deep")
        kind = self.kinds[node]
        end = len(data)
        if kind == AVRO_NULL:
            return pos
        if kind == AVRO_BOOLEAN:
            size = 1
        elif kind in (AVRO_INT, AVRO_LONG):
            value, pos = self._long(data, pos)
            if kind == AVRO_INT and not -_INT32 <= value < _INT32:
                raise _AvroInvalid("an int out of 32 bits")
            return pos
        elif kind == AVRO_FLOAT:
            size = 4
        elif kind == AVRO_DOUBLE:
            size = 8
        elif kind == AVRO_FIXED:
            size = self.a[node]
        elif kind in (AVRO_BYTES, AVRO_STRING):
            size, pos = self._long(data, pos)
            if size < 0:
                raise _AvroInvalid("a negative length")
            if kind == AVRO_STRING and pos + size <= end:
                _utf8(data, pos, size)
        elif kind in (AVRO_ENUM, AVRO_UNION):
            index, pos = self._long(data, pos)
            count = self.a[node] if kind == AVRO_ENUM else self.b[node]
            if not 0 <= index < count:
                what = "an enum symbol" if kind == AVRO_ENUM else "a union branch"
                raise _AvroInvalid(f"{what} index {index} out of range")
            if kind == AVRO_ENUM:
                return pos
            return self._skip(data, pos, self.children[self.a[node] + index], depth + 1)
        elif kind in (AVRO_ARRAY, AVRO_MAP):
            item = self.a[node]
            while True:
                count, pos = self._long(data, pos)
                if count == 0:
                    return pos
                if count < 0:
                    count = -count
                    _, pos = self._long(data, pos)  # the block's size in bytes
                if kind == AVRO_ARRAY and self.b[node]:
                    continue  # items of no bytes: nothing to read
                if count > end - pos:  # every item takes a byte at least
                    raise _AvroInvalid(_AVRO_EOF)
                for _ in range(count):
                    if kind == AVRO_MAP:
                        size, pos = self._long(data, pos)
                        if size < 0:
                            raise _AvroInvalid("a negative length")
                        if pos + size > end:
                            raise _AvroInvalid(_AVRO_EOF)
                        _utf8(data, pos, size)
                        pos += size
                    pos = self._skip(data, pos, item, depth + 1)
        else:  # AVRO_RECORD
            first = self.a[node]
            for i in range(first, first + self.b[node]):
                pos = self._skip(data, pos, self.children[i], depth + 1)
            return pos
        if pos + size > end:
            raise _AvroInvalid(_AVRO_EOF)
        return pos + size


def _utf8(data: bytes, pos: int, size: int) -> None:
    try:
        bytes(data[pos : pos + size]).decode("utf-8")
    except UnicodeDecodeError:
        raise _AvroInvalid("a string is not UTF-8") from None
